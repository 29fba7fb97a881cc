# The jobtree image: the `jobtree` command (reconcile, apply, agent, ...) and nothing else.
# Built from this repository with pip, no hand steps:  docker build -t jobtree:dev .
# No git binary: pygit2's wheel bundles libgit2 (HTTPS through its bundled OpenSSL, pointed at the
# system CA bundle below). Runs as an unprivileged user and on a read-only root file system: the
# only writable paths are the volumes the manifests mount (/tmp, /var/lib/jobtree).

FROM python:3.11-slim AS build
WORKDIR /src
# only what the package is built from (.dockerignore keeps the rest out of the context)
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY planner ./planner
COPY reconciler ./reconciler
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="jobtree" \
      org.opencontainers.image.description="Run GPU fleets from Git: reconciler, apply and in-cluster agent"
# ca-certificates: the trust store for HTTPS fleet remotes (libgit2) and the Kubernetes client
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 jobtree \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/jobtree --no-create-home \
      --shell /usr/sbin/nologin jobtree \
 && install -d -o 10001 -g 10001 /var/lib/jobtree
COPY --from=build /wheels /wheels
# pip compiles the byte-code at install time, so a read-only root file system costs nothing
RUN pip install --no-cache-dir --no-index --find-links=/wheels jobtree \
 && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_DIR=/etc/ssl/certs
USER 10001:10001
WORKDIR /var/lib/jobtree
ENTRYPOINT ["jobtree"]
CMD ["--help"]
