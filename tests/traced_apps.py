"""Two real RAG apps for tests/test_traced_apps.py, as users write them: a LangChain LCEL chain and a
LlamaIndex query engine over ragexp's demo passages, with the fake models the frameworks ship
(langchain-core's DeterministicFakeEmbedding / FakeListChatModel, llama_index.core's MockEmbedding /
MockLLM). Passage ids are the demo's (``bee-01``…), so the dataset's ground truth ids apply."""

from __future__ import annotations

import json

from ragexp.datasets.demo import HERE

PASSAGES = [json.loads(line) for line in (HERE / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
ANSWERS = ["The queen.", "Twelve.", "", "North of the river.", "Sourdough starter."]


def langchain_retriever(k: int = 3):
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents([Document(page_content=p["text"], id=p["id"], metadata={"title": p["title"]})
                         for p in PASSAGES])
    return store.as_retriever(search_kwargs={"k": k})


def langchain_app(k: int = 3):
    if k < 1:
        raise ValueError(f"k must be a positive number of passages, got {k}")
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    retriever = langchain_retriever(k)
    prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
    chat = FakeListChatModel(responses=ANSWERS)
    return ({"context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()} | prompt | chat | StrOutputParser())


def llama_index_app(k: int = 2):
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode

    nodes = [TextNode(id_=p["id"], text=p["text"], metadata={"title": p["title"]}) for p in PASSAGES]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(similarity_top_k=k, llm=MockLLM(max_tokens=6))


def plain_app(fail_on: str = "Moon"):
    """An app of plain Python, traced with ``@mlflow.trace`` (a retriever span of its own), that raises on
    questions containing ``fail_on``."""
    import mlflow

    @mlflow.trace(span_type="RETRIEVER")
    def search(question: str) -> list[dict]:
        return [{"page_content": p["text"], "id": p["id"]} for p in PASSAGES
                if p["title"].split()[0].lower() in question.lower()][:2]

    def ask(question: str) -> str:
        if fail_on in question:
            raise RuntimeError(f"the model is down for {fail_on!r}")
        docs = search(question)
        return docs[0]["page_content"].split(".")[0] if docs else ""

    return ask
