"""The text stage's core: reading dumps, cleaning wikitext to prose, articles and books,
sentence splitting, spilling documents to their text shard, and the text shards themselves."""
