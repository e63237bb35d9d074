FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kafkawire kafkawire
COPY protocol protocol
COPY log log
COPY kraft kraft
COPY groups groups
COPY txn txn
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME /data
ENTRYPOINT ["kafkawire", "serve"]
CMD ["--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092", \
     "--override", "log.dir=/data"]
