# A Worker. Runs as ROOT, the one role that must: the local backend gives every sandbox a host uid
# of its own (it setuids to it) and creates namespaces with bubblewrap, which inside a container
# also needs --privileged (or CAP_SYS_ADMIN with unconfined seccomp and AppArmor); the docker
# backend needs the engine's socket instead, which is root-equivalent anyway (docs/deploy.md).
ARG FROM_IMAGE=ale-services:latest
FROM ${FROM_IMAGE}
USER 0:0
ENTRYPOINT ["ale-rock", "worker"]
