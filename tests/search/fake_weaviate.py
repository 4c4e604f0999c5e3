"""An in-process stand-in for a Weaviate server, for the real weaviate client to talk to.

The gRPC side implements the Weaviate service (Search, BatchObjects, BatchDelete, Aggregate) from the
client's own generated stubs; a small HTTP server answers the REST endpoints the backend uses (meta,
readiness, schema, aliases). So every request the backend makes is built, serialized and parsed by the
real client, and only the server is constructed. It stores what it is sent and searches it the way
Weaviate does: the filter applied inside the search, a multi-vector scored by MaxSim (for a one-row query,
the best dot product of the object's vectors), results best first, ``limit`` of them.

Faults for the failure tests: ``stall`` (Search blocks until ``release``), ``unavailable`` (Search answers
UNAVAILABLE, which the client retries with back-off), ``stop()``/``start()`` (connection refused/reset),
``fail_uuids`` (BatchObjects reports those objects as failed), ``lose_uuids`` (acknowledged, not
stored), ``version`` (what /v1/meta reports).
"""

import json
import struct
import threading
import uuid as uuid_lib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
from weaviate.proto.v1 import (
    aggregate_pb2,
    base_pb2,
    batch_delete_pb2,
    batch_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

HNSW_DEFAULTS = {
    "cleanupIntervalSeconds": 300,
    "distance": "cosine",
    "dynamicEfMin": 100,
    "dynamicEfMax": 500,
    "dynamicEfFactor": 8,
    "ef": -1,
    "efConstruction": 128,
    "flatSearchCutoff": 40000,
    "maxConnections": 32,
    "skip": False,
    "vectorCacheMaxObjects": 1000000000000,
}


def _multi(data: bytes) -> np.ndarray:
    dim = struct.unpack("<H", data[:2])[0]
    return np.frombuffer(data[2:], dtype="<f4").reshape(-1, dim)


def _pack_multi(matrix: np.ndarray) -> bytes:
    return struct.pack("<H", matrix.shape[1]) + np.ascontiguousarray(matrix, dtype="<f4").tobytes()


def _value(value) -> properties_pb2.Value:
    if isinstance(value, bool):
        return properties_pb2.Value(bool_value=value)
    if isinstance(value, int):
        return properties_pb2.Value(int_value=value)
    if isinstance(value, float):
        return properties_pb2.Value(number_value=value)
    if isinstance(value, list):
        return properties_pb2.Value(
            list_value=properties_pb2.ListValue(text_values=properties_pb2.TextValues(values=[str(v) for v in value]))
        )
    if value is None:
        return properties_pb2.Value(null_value=0)
    return properties_pb2.Value(text_value=str(value))


class FakeWeaviate(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, version: str = "1.32.6") -> None:
        self.version = version
        self.collections: dict[str, dict] = {}  # name -> {"schema": dict, "objects": {uuid: object}}
        self.aliases: dict[str, str] = {}
        self.lock = threading.RLock()
        self.stall = False
        self.unavailable = False
        self.fail_uuids: set[str] = set()
        self.lose_uuids: set[str] = set()  # acknowledged but not stored (a write lost by the server)
        self.release = threading.Event()
        self.stalled = threading.Event()  # set when a Search started stalling
        self.searches = 0
        self.requests: list = []  # the last Search requests, as sent
        self.log: list[tuple] = []  # ("create", name) / ("alias", alias, target) / ("batch", name, n) / ("drop", name)
        # Set to an Event: a batch write into a collection no alias points to (a build) waits for it.
        self.pause_builds: threading.Event | None = None
        self.build_paused = threading.Event()
        self.grpc_port = 0
        self.http_port = 0
        self._grpc = None
        self._http = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> "FakeWeaviate":
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(self, self._grpc)
        self.grpc_port = self._grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        self._grpc.start()
        fake = self

        class Handler(_RestHandler):
            server_state = fake

        self._http = ThreadingHTTPServer(("127.0.0.1", self.http_port), Handler)
        self._http.daemon_threads = True
        self.http_port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening (connections refused; open calls reset); ``start()`` again on the same ports."""
        self.release.set()
        if self._grpc is not None:
            self._grpc.stop(0)
            self._grpc = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    def resolve(self, name: str) -> str:
        return self.aliases.get(name, name)

    def objects(self, name: str) -> dict:
        return self.collections[self.resolve(name)]["objects"]

    # -- gRPC --------------------------------------------------------------------------------------------
    def Search(self, request, context):  # noqa: N802 - the generated service's method name
        self.searches += 1
        self.requests = [*self.requests[-49:], request]
        if self.unavailable:
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset by peer")
        if self.stall:
            self.stalled.set()
            self.release.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "stalled server went away")
        with self.lock:
            name = self.resolve(request.collection)
            if name not in self.collections:
                context.abort(grpc.StatusCode.NOT_FOUND, f"collection {request.collection} not found")
            matches = self._matcher(request.filters)
            found = [o for o in self.collections[name]["objects"].values() if matches(o)]
        if request.HasField("near_vector"):
            target = request.near_vector.targets.target_vectors[0]
            query = _multi(request.near_vector.vectors[0].vector_bytes)
            scored = []
            for obj in found:
                vectors = obj["vectors"].get(target)
                if vectors is None:
                    continue
                score = float((vectors @ query.T).max(axis=0).sum())  # MaxSim
                scored.append((-score, obj["uuid"], obj))
            scored.sort(key=lambda item: (item[0], item[1]))
            ordered = [(obj, distance) for distance, _, obj in scored]
        else:
            after = request.after
            found.sort(key=lambda obj: obj["uuid"])
            ordered = [(obj, None) for obj in found if not after or obj["uuid"] > after]
        limit = request.limit or 10
        reply = search_get_pb2.SearchReply()
        wanted = list(request.properties.non_ref_properties)
        for obj, distance in ordered[:limit]:
            result = reply.results.add()
            for key in wanted:
                if key in obj["properties"]:
                    result.properties.non_ref_props.fields[key].CopyFrom(_value(obj["properties"][key]))
            result.metadata.id_as_bytes = uuid_lib.UUID(obj["uuid"]).bytes
            if distance is not None:
                result.metadata.distance = distance
                result.metadata.distance_present = True
            for vector_name in request.metadata.vectors:
                if vector_name in obj["vectors"]:
                    result.metadata.vectors.add(
                        name=vector_name,
                        vector_bytes=_pack_multi(obj["vectors"][vector_name]),
                        type=base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32,
                    )
        return reply

    @staticmethod
    def _matcher(filters):
        if not filters.ListFields():
            return lambda obj: True
        assert filters.operator == base_pb2.Filters.OPERATOR_CONTAINS_ANY, filters
        wanted, key = set(filters.value_int_array.values), filters.target.property
        return lambda obj: obj["properties"].get(key) in wanted

    def BatchObjects(self, request, context):  # noqa: N802
        reply = batch_pb2.BatchObjectsReply()
        names = {self.resolve(item.collection) for item in request.objects}
        pause = self.pause_builds
        if pause is not None and not names & set(self.aliases.values()):
            self.build_paused.set()
            pause.wait()
        with self.lock:
            self.log.extend(("batch", name, len(request.objects)) for name in sorted(names))
            for index, item in enumerate(request.objects):
                if item.uuid in self.fail_uuids:
                    reply.errors.add(index=index, error="simulated write failure")
                    continue
                if item.uuid in self.lose_uuids:
                    continue
                properties = {}
                for key, value in item.properties.non_ref_properties.fields.items():
                    kind = value.WhichOneof("kind")
                    if kind == "number_value":
                        number = value.number_value
                        properties[key] = int(number) if float(number).is_integer() else number
                    elif kind == "string_value":
                        properties[key] = value.string_value
                    elif kind == "bool_value":
                        properties[key] = value.bool_value
                for array in item.properties.text_array_properties:
                    properties[array.prop_name] = list(array.values)
                for key in item.properties.empty_list_props:
                    properties[key] = []
                vectors = {v.name: _multi(v.vector_bytes).copy() for v in item.vectors}
                name = self.resolve(item.collection)
                self.collections[name]["objects"][item.uuid] = {
                    "uuid": item.uuid,
                    "properties": properties,
                    "vectors": vectors,
                }
        return reply

    def BatchDelete(self, request, context):  # noqa: N802
        with self.lock:
            objects = self.objects(request.collection)
            matches = self._matcher(request.filters)
            doomed = [key for key, obj in objects.items() if matches(obj)]
            for key in doomed:
                del objects[key]
        return batch_delete_pb2.BatchDeleteReply(matches=len(doomed), successful=len(doomed))

    def Aggregate(self, request, context):  # noqa: N802
        with self.lock:
            count = len(self.objects(request.collection))
        return aggregate_pb2.AggregateReply(single_result=aggregate_pb2.AggregateReply.Single(objects_count=count))


class _RestHandler(BaseHTTPRequestHandler):
    server_state: FakeWeaviate

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body=None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:  # noqa: N802
        fake, path = self.server_state, self.path.split("?")[0]
        with fake.lock:
            if path == "/v1/meta":
                return self._send(200, {"version": fake.version, "hostname": "fake", "modules": {}})
            if path in ("/v1/.well-known/ready", "/v1/.well-known/live"):
                return self._send(200)
            if path == "/v1/schema":
                return self._send(200, {"classes": [c["schema"] for c in fake.collections.values()]})
            if path.startswith("/v1/schema/"):
                name = path.rsplit("/", 1)[1]
                found = fake.collections.get(name)
                return self._send(200, found["schema"]) if found else self._send(404, {"error": []})
            if path.startswith("/v1/aliases/"):
                alias = path.rsplit("/", 1)[1]
                if alias in fake.aliases:
                    return self._send(200, {"alias": alias, "class": fake.aliases[alias]})
                return self._send(404, {"error": []})
        return self._send(404, {"error": [{"message": f"no route {path}"}]})

    def do_POST(self) -> None:  # noqa: N802
        fake, path, body = self.server_state, self.path.split("?")[0], self._body()
        with fake.lock:
            if path == "/v1/schema":
                if body["class"] in fake.collections:
                    return self._send(422, {"error": [{"message": f"class {body['class']} already exists"}]})
                for prop in body.get("properties", []):  # the server fills in the defaults
                    prop.setdefault("indexFilterable", True)
                    prop.setdefault("indexSearchable", prop["dataType"][0] in ("text", "text[]"))
                    prop.setdefault("indexRangeFilters", False)
                    prop.setdefault("tokenization", "word" if prop["dataType"][0] in ("text", "text[]") else None)
                body.setdefault("vectorizer", "none")
                for named in body.get("vectorConfig", {}).values():
                    index = named.setdefault("vectorIndexConfig", {})
                    for key, value in HNSW_DEFAULTS.items():
                        index.setdefault(key, value)
                    if "multivector" in index:
                        index["multivector"].setdefault("aggregation", "maxSim")
                fake.collections[body["class"]] = {"schema": body, "objects": {}}
                fake.log.append(("create", body["class"]))
                return self._send(200, body)
            if path == "/v1/aliases":
                if body["alias"] in fake.aliases:
                    return self._send(422, {"error": [{"message": f"alias {body['alias']} already exists"}]})
                fake.aliases[body["alias"]] = body["class"]
                fake.log.append(("alias", body["alias"], body["class"]))
                return self._send(200, body)
        return self._send(404, {"error": [{"message": f"no route {path}"}]})

    def do_PUT(self) -> None:  # noqa: N802
        fake, path, body = self.server_state, self.path.split("?")[0], self._body()
        with fake.lock:
            if path.startswith("/v1/aliases/"):
                alias = path.rsplit("/", 1)[1]
                if alias not in fake.aliases:
                    return self._send(404, {"error": []})
                fake.aliases[alias] = body["class"]
                fake.log.append(("alias", alias, body["class"]))
                return self._send(200, {"alias": alias, "class": body["class"]})
        return self._send(404, {"error": [{"message": f"no route {path}"}]})

    def do_DELETE(self) -> None:  # noqa: N802
        fake, path = self.server_state, self.path.split("?")[0]
        with fake.lock:
            if path.startswith("/v1/schema/"):
                name = path.rsplit("/", 1)[1]
                if name in fake.aliases.values():
                    return self._send(422, {"error": [{"message": f"{name} is the target of an alias"}]})
                if fake.collections.pop(name, None) is not None:
                    fake.log.append(("drop", name))
                return self._send(200)
            if path.startswith("/v1/aliases/"):
                fake.aliases.pop(path.rsplit("/", 1)[1], None)
                return self._send(204)
        return self._send(404, {"error": [{"message": f"no route {path}"}]})
