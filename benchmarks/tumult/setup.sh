#!/usr/bin/env bash
# Make the Tumult Analytics virtualenv for benchmarks/spark.py --tumult (benchmark only; never a
# PHExplore dependency). tmlt.analytics 0.21.0 pins pyspark 3.5, pandas < 2 and numpy 1.26, so it
# gets its own environment: benchmarks/tumult/.venv-tumult (git-ignored), from PyPI with pip.
# Needs Python 3.11 (or 3.9/3.10) and Java 17 (Spark 3.5 runs on it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3.11}"
if [ ! -x "$here/.venv-tumult/bin/python" ]; then
    "$python" -m venv "$here/.venv-tumult"
fi
"$here/.venv-tumult/bin/pip" install --quiet --upgrade pip
"$here/.venv-tumult/bin/pip" install --quiet 'tmlt.analytics==0.21.0'
"$here/.venv-tumult/bin/python" -c 'import tmlt.analytics, pyspark; print("tmlt.analytics ready on pyspark", pyspark.__version__)'
