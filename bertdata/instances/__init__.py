"""The instance stage's core: the WordPiece vocab and tokenizer, reading a text shard into token
ids, and the reference masked-LM / next-sentence algorithm (compiled, bit-exact)."""
