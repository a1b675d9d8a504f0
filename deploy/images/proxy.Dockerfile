# The ModelProxy (gRPC ModelProxyService + the OpenAI-compatible HTTP endpoint), non-root (uid 10001).
ARG FROM_IMAGE=ale-services:latest
FROM ${FROM_IMAGE}
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1
WORKDIR /var/lib/ale
USER 10001:10001
ENTRYPOINT ["ale-rock", "proxy"]
CMD ["--host", "0.0.0.0"]
