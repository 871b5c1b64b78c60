# The image `actorflow k8s manifest --image ...` names: actorflow and its dependencies, nothing else.
#   docker build -t registry.example/actorflow:0.1 .
FROM python:3.11-slim
RUN useradd --create-home --uid 1000 actorflow
WORKDIR /opt/actorflow
COPY pyproject.toml README.md ./
COPY actorflow ./actorflow
COPY sims ./sims
RUN pip install --no-cache-dir . && python -c "import actorflow"
USER actorflow
WORKDIR /home/actorflow
EXPOSE 2222
# Every task learns its role from the pod's environment (KubernetesClusterResolver).
ENTRYPOINT []
CMD ["actorflow", "worker", "--from-k8s", "--bind", "0.0.0.0"]
