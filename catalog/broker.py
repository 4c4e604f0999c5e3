"""The Redis broker transport of the Celery app: kombu's, except that a worker that loses Redis stays up.

A worker that loses its broker connection collects it, then closes it (Celery 5.7
``Consumer.on_connection_error_after_connected``). Closing the channel puts the messages the worker holds unacked
(a countdown task waiting for its time, such as the learned-request flush or a debounced sync, or a prefetched one)
back on their queue through the connection's client, which the collect has already dropped. kombu 5.7 then fails
with ``AttributeError: 'NoneType' object has no attribute 'hostname'``, which is not a connection error, so
nothing ignores it: "Unrecoverable error" and the worker exited. In the demo a 30 s Redis stop ended the worker;
syncs, notifications and purges then waited for someone to start it again (opsux3).

Here that restore talks to the broker through a client of its own (the Celery broker URL, short timeouts): while
Redis is down it fails with a connection error, which the close ignores (the messages stay in Redis's unacked set,
redelivered after the visibility timeout, as kombu intends); when Redis answers, they are back on their queue.
"""

from __future__ import annotations

import redis
from django.conf import settings
from kombu.transport import redis as kombu_redis


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client=None):
        if client is not None or self.channel.connection.client is not None:
            return super().restore_unacked(client)
        timeout = settings.CELERY_BROKER_CONNECTION_TIMEOUT
        own = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return super().restore_unacked(own)
        finally:
            own.close()


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel
