"""The offline fake model (`fake/default` for chat, `fake/embedding` for vectors): a plug-in provider that
answers like a model without a network, for the tests, the demo and benchmarks. It lives above what it
imitates; the model-calling layer (llm/) finds it through the entry point `graphrag_lite.providers: fake`
(plug_in.py) and knows nothing of it.

provider.py is the LiteLLM handler; answers.py and extraction.py compute its answers; script.py gives a
test's scripted replies; embedding.py its vectors; batch.py its batch endpoint; options.py the options of a
model string (faults, latency, ...).
"""
