"""Downloads: resumable, verified HTTP fetches, where a Wikimedia dump's files live, and the
remembered sha1 of local dumps."""
