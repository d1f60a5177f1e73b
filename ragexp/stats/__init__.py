"""Statistics on evaluation results: the uncertainty of a run's means (:mod:`.intervals`) and
paired comparisons of runs (:mod:`.paired`). numpy and scipy are imported inside the functions."""
