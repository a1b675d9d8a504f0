# ale-roll's TrainerService (submit/watch/stop training jobs) on port 50080, non-root (uid 10001);
# runs are written under /var/lib/ale. A one-shot run instead:
#   docker run --entrypoint ale-roll ale-trainer train --config /cfg/run.yaml
ARG FROM_IMAGE=ale-roll:latest
FROM ${FROM_IMAGE}
ENV PATH=/opt/ale/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1
WORKDIR /var/lib/ale
USER 10001:10001
ENTRYPOINT ["ale-roll", "serve"]
CMD ["--host", "0.0.0.0", "--port", "50080"]
