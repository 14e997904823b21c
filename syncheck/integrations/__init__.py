"""Chat models for a ``syncheck serve`` endpoint in LangChain and LlamaIndex, with the scores in their own objects.

- :class:`syncheck.integrations.langchain.ChatSyncheck` (``pip install 'syncheck[langchain]'``): a
  ``langchain_openai.ChatOpenAI``; ``invoke`` puts the reply's ``syncheck`` object (every sentence with its score,
  ``response_score``, ``thresholds``, ``trace``) in ``AIMessage.response_metadata["syncheck"]``, and ``stream``
  puts each finished sentence and the final summary in their chunks' ``response_metadata["syncheck"]``.
- :class:`syncheck.integrations.llamaindex.SyncheckLLM` (``pip install 'syncheck[llamaindex]'``): a
  ``llama_index.llms.openai_like.OpenAILike``; ``chat``/``stream_chat``/``complete``/``stream_complete`` put it in
  the response's ``additional_kwargs["syncheck"]``.

Both take the documents and syncheck's settings (``method``, ``tau1``, ...) in the constructor or per call. Importing
this package imports neither framework; importing one of its modules without its extra raises an ImportError that
names the extra.
"""
