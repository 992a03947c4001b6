"""Duplicates and benchmark leaks out of a build (docs/dedup.md): exact and MinHash
near-duplicates across every corpus, and documents that share an n-gram with an evaluation set.

Plain functions over numpy, so the pipeline's DoFns stay thin and tests need no Beam:
`words` hashes a text's words and n-grams, `minhash` makes a document's signature and band
keys, `clusters` joins matches into clusters and picks the document each keeps, `evals` reads
evaluation sets into n-gram tables.
"""
