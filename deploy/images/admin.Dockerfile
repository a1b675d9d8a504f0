# The Admin (SandboxService + WorkerRegistryService) on port 7700, non-root (the services layer's
# user `ale`, uid 10001); its SQLite state in /var/lib/ale: mount a volume there. Keys and the
# join token by flags or a mounted --config file (docs/deploy.md). Role Dockerfiles hold metadata
# only: build.sh applies them with one `docker commit --change` each.
ARG FROM_IMAGE=ale-services:latest
FROM ${FROM_IMAGE}
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1
WORKDIR /var/lib/ale
USER 10001:10001
ENTRYPOINT ["ale-rock", "admin"]
CMD ["--host", "0.0.0.0", "--port", "7700", "--db", "/var/lib/ale/admin.db"]
