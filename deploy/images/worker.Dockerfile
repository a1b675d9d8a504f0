# A Worker. Runs as ROOT, the one role that must: the local backend gives every sandbox a host uid
# of its own (it setuids to it) and mounts each sandbox's tmpfs, so in a container it needs
# CAP_SYS_ADMIN, and bubblewrap's user namespaces need unconfined seccomp, AppArmor and /proc
# (docs/deploy.md has the docker run line); the docker backend needs the engine's socket instead,
# which is root-equivalent anyway.
ARG FROM_IMAGE=ale-services:latest
FROM ${FROM_IMAGE}
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1
WORKDIR /var/lib/ale
USER 0:0
ENTRYPOINT ["ale-rock", "worker"]
