"""What runs the build's stages, and is no stage: the local worker pool and its workers, the
runner, file I/O through Beam's FileSystems and object stores, the console and log, progress,
and a failure told in one line."""
