# The ale-roll layer (inference, trainer): the services layer + ale-roll and its CPU torch stack,
# from the ale-roll wheel `make dist` builds and third-party wheels build.sh downloads once into
# .cache/images/roll-deps (the host's pip and index configuration; the build itself is offline).
# For GPU images, put a CUDA torch wheel in that directory instead (docs/deploy.md).
ARG SERVICES=ale-services:latest
FROM ${SERVICES}
COPY . /tmp/ale-build/
RUN PYTHONPATH=/tmp/ale-build/pip /opt/ale/bin/python -m pip install -q --no-index --no-cache-dir \
      --disable-pip-version-check --find-links /tmp/ale-build/wheels ale-roll \
 && rm -rf /tmp/ale-build
