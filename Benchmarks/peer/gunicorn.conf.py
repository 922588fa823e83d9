# gunicorn for the benchmark peer. gthread workers keep HTTP/1.1 connections alive (the sync worker closes
# every connection), as Gatehouse does; the worker count follows gunicorn's advice, 2 x cores + 1.
import multiprocessing
import os

bind = os.environ.get("PEER_BIND", "127.0.0.1:9190")
worker_class = "gthread"
workers = int(os.environ.get("PEER_WORKERS", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("PEER_THREADS", "1"))
keepalive = 75
backlog = 2048
accesslog = None
errorlog = "-"
loglevel = "warning"
