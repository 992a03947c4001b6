"""Apache Beam pipelines built on the bertdata core: dump -> text shards -> hdf5 shards."""
