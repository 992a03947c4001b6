"""bertdata: Wikipedia dump -> BERT pretraining hdf5 shards (NGC layout), and a BERT throughput benchmark."""

__version__ = "0.1.0"
