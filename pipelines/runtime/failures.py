"""A failed pipeline's error, told as one line when it is one the user can fix: a BertdataError
raised in a worker, or an output disk that is full or refuses writes."""

from __future__ import annotations

import contextlib
import errno
import importlib
import re

from bertdata.errors import BertdataError

# How a BertdataError raised in a worker reads once Beam has wrapped it, in this process or
# as the text of a remote traceback: "bertdata.text.wikidump.BertdataError: MESSAGE [while running ...]".
_REMOTE_ERROR = re.compile(r"^(bertdata(?:\.\w+)*)\.(\w+): (.+?)(?: \[while running '[^']*'\])*$", re.M)


# A write that failed for lack of room or rights, or a path the filesystem refuses, as a remote
# traceback states it.
_OUTPUT_ERROR = re.compile(r"(?:OSError|PermissionError): \[Errno (\d+)\] ([^\n\[]+)")
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG}


# HDF5 tells a failed write in its own words, with the system's inside; when the disk fills
# as a file is closed, h5py raises it as a RuntimeError, with no OSError to be seen.
_HDF5_WRITE = re.compile(r"filename = '([^']*)'.*?errno = (\d+), error message = '([^']*)'", re.S)


def _output_error(text: str, message: str, filename: str | None) -> str:
    hdf5 = _HDF5_WRITE.search(text)
    if hdf5:
        message, filename = hdf5.group(3), hdf5.group(1)
    return f"cannot write output: {message}" + (f": {filename}" if filename else "")


def user_error(err: BaseException) -> str | None:
    """The message behind a pipeline failure the user can fix (a BertdataError, or a full or
    read-only output disk), if that is what it was."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, BertdataError):  # raised in this process; Beam appends the step's name
            return re.sub(r"( \[while running '[^']*'\])+$", "", str(err))
        if isinstance(err, OSError) and err.errno in _OUTPUT_ERRNOS:
            return _output_error(str(err), err.strerror, err.filename)
        for module, name, message in _REMOTE_ERROR.findall(str(err)):
            # By name: the module is one a worker's traceback names (any of bertdata's), known
            # only from that text, as pickle finds an exception's class.
            with contextlib.suppress(ImportError):
                cls = getattr(importlib.import_module(module), name, None)
                if isinstance(cls, type) and issubclass(cls, BertdataError):
                    return message
        for number, message in _OUTPUT_ERROR.findall(str(err)):
            if int(number) in _OUTPUT_ERRNOS:
                return _output_error(str(err), message.strip(), None)
        hdf5 = _HDF5_WRITE.search(str(err))
        if hdf5 and int(hdf5.group(2)) in _OUTPUT_ERRNOS:
            return _output_error(str(err), hdf5.group(3), hdf5.group(1))
        err = err.__cause__ or err.__context__
    return None
