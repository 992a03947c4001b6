"""The compiled inner loops (plain C API, no numpy headers needed to build).

Everything else about the package is in pyproject.toml; the extensions are listed here because
setuptools still calls `[tool.setuptools] ext-modules` experimental and says so on every build.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("bertdata.instances._engine", ["bertdata/instances/_engine.c"],
              depends=["bertdata/instances/_arrays.h", "bertdata/instances/_mt.h"]),
    Extension("bertdata.instances._rows", ["bertdata/instances/_rows.c"],
              depends=["bertdata/instances/_arrays.h"]),
    Extension("bertdata.instances._wordpiece", ["bertdata/instances/_wordpiece.c"],
              depends=["bertdata/instances/_arrays.h", "bertdata/instances/_lines.h"]),
    Extension("bertdata.text._scan", ["bertdata/text/_scan.c"],
              depends=["bertdata/text/_chars.h", "bertdata/text/_punkt.h"]),
    Extension("bertdata.text._markup", ["bertdata/text/_markup.c"],
              depends=["bertdata/text/_chars.h"]),
    Extension("bertdata.text._tags", ["bertdata/text/_tags.c"],
              depends=["bertdata/text/_chars.h"]),
    Extension("bertdata.text._prose", ["bertdata/text/_prose.c"],
              depends=["bertdata/text/_chars.h"]),
    Extension("bertdata.text._spans", ["bertdata/text/_spans.c"],
              depends=["bertdata/text/_chars.h"]),
    Extension("bertdata.text._pages", ["bertdata/text/_pages.c"]),
    Extension("bertdata.text._bunzip", ["bertdata/text/_bunzip.c"],
              depends=["bertdata/text/_bzblock.h", "bertdata/text/_bzwalk.h"]),
    Extension("bertdata.formats._chunks", ["bertdata/formats/_chunks.c"],
              depends=["bertdata/instances/_arrays.h"]),
    Extension("bertdata.formats._zrle", ["bertdata/formats/_zrle.c"],
              depends=["bertdata/formats/_huffman.h"]),
])
