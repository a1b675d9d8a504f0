# The shared services layer: the project's base image (scripts/build_base_image.sh) + a venv at
# /opt/ale holding ale-proto, ale-rock[docker,proxy] and ale-flow installed from the wheels
# `make dist` builds (scripts/dist.py) and their third-party wheels (.cache/dist-deps, made by
# scripts/setup.sh): no index and no registry is reached while building. Also bubblewrap (from the
# host's apt cache), so the worker image can run the local backend. The role images (admin,
# worker, proxy) are thin layers on top of this; roll.Dockerfile adds ale-roll for the others.
# Built by deploy/images/build.sh, which prepares the context (wheels/, pip/, debs/).
ARG BASE=ale-rock-base:bookworm-py311-v1
FROM ${BASE}
USER 0:0
COPY . /tmp/ale-build/
# pip runs from the copied package (the base image has python3 but no pip; ensurepip is not in
# Debian's python3), so the venv itself carries no pip. `ale` (uid 10001) is the services' user.
RUN dpkg -i /tmp/ale-build/debs/*.deb >/dev/null \
 && python3 -m venv --without-pip /opt/ale \
 && PYTHONPATH=/tmp/ale-build/pip /opt/ale/bin/python -m pip install -q --no-index --no-cache-dir \
      --disable-pip-version-check --no-compile --find-links /tmp/ale-build/wheels "ale-rock[docker,proxy]" ale-flow \
 && /opt/ale/bin/python -m compileall -q -j 0 /opt/ale/lib >/dev/null \
 && rm -rf /tmp/ale-build \
 && echo 'ale:x:10001:10001:ALE services:/var/lib/ale:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'ale:x:10001:' >>/etc/group \
 && echo 'ale:*:19000:0:99999:7:::' >>/etc/shadow \
 && mkdir -p /var/lib/ale && chown 10001:10001 /var/lib/ale
# No ENV/WORKDIR/USER here: with the classic builder each instruction costs a container and a
# commit on the engine (the install itself is ~10 s); the role Dockerfiles carry the runtime
# settings, and build.sh applies those in one commit. So this layer's user stays root.
