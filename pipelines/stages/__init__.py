"""The build's stages, one module each with the records only it makes or reads: the text
(text, with its dedup), the instances (instances), each format cut per split (documents) and
LDDL's folders (lddl). Each follows the contract of bertdata.pipelines.stage."""
