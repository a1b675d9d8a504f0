# ale-roll's InferenceService on one model (mount it, pass --model), on port 50070, non-root (uid 10001).
ARG FROM_IMAGE=ale-roll:latest
FROM ${FROM_IMAGE}
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1
WORKDIR /var/lib/ale
USER 10001:10001
ENTRYPOINT ["ale-roll", "serve-inference"]
CMD ["--host", "0.0.0.0", "--port", "50070"]
