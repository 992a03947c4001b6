"""BERT pretraining throughput benchmark on the hdf5 shards (needs torch: `pip install 'bertdata[bench]'`)."""
