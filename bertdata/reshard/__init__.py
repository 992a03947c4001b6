"""`bertdata shard`: re-partition training shards into N balanced, globally shuffled parts."""
