"""The model-facing side: the network (`model`), loading any supported checkpoint layout
(`loading`), the tokenizer and id layout (`tokenizer`), the text format and its parser
(`format`, `lexical`) and the format profiles that tie them together (`profiles`)."""
