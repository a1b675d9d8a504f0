# The ModelProxy (gRPC ModelProxyService + the OpenAI-compatible HTTP endpoint), non-root (uid 10001).
ARG FROM_IMAGE=ale-services:latest
FROM ${FROM_IMAGE}
ENTRYPOINT ["ale-rock", "proxy"]
CMD ["--host", "0.0.0.0"]
