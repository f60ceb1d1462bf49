"""The auth of the suite's second server pair, for `langgraph dev` (weft's half: `weft-server-e2e --auth`,
which serves the same users with `ServerBuilder::api_keys`): two users by API key, each seeing only the
threads (with their runs), the assistants and the crons it made, and the assistants the server made for its
graphs.
"""
from langgraph_sdk import Auth

USERS = {"key-alice": "alice", "key-bob": "bob"}

auth = Auth()


@auth.authenticate
async def authenticate(headers: dict) -> Auth.types.MinimalUserDict:
    key = headers.get(b"x-api-key")
    bearer = headers.get(b"authorization", b"")
    token = bearer[7:].strip() if bearer[:7].lower() == b"bearer " else None
    given = key or token
    if not given:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Missing authentication: an x-api-key or a bearer token")
    identity = USERS.get(given.decode())
    if identity is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid API key or token")
    return {"identity": identity}


def _stamp(ctx, value):
    metadata = value.get("metadata")
    if metadata is None:
        metadata = value["metadata"] = {}
    metadata["owner"] = ctx.user.identity


@auth.on.threads
async def threads(ctx: Auth.types.AuthContext, value: dict):
    if ctx.action in ("create", "create_run", "update"):
        _stamp(ctx, value)
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: dict):
    if ctx.action in ("create", "update"):
        _stamp(ctx, value)
    return {"$or": [{"owner": ctx.user.identity}, {"created_by": "system"}]}


@auth.on.crons
async def crons(ctx: Auth.types.AuthContext, value: dict):
    if ctx.action in ("create", "update"):
        _stamp(ctx, value)
    return {"owner": ctx.user.identity}
