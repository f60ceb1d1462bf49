//! Authentication and authorization: credentials, two users on every route family, a custom hook.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use common::{Reply, builder, send, start};
use serde_json::{Value, json};
use weft_server::{Action, Auth, AuthContext, AuthError, AuthRequest, Filter, Resource, ServerError, User};

const ALICE: (&str, &str) = ("x-api-key", "key-alice");
const BOB: (&str, &str) = ("authorization", "Bearer token-bob");

fn keyed() -> weft_server::ServerBuilder {
    builder().api_keys([("key-alice", "alice")]).bearer_tokens([("token-bob", "bob")])
}

async fn call(addr: SocketAddr, who: (&str, &str), method: &str, path: &str, body: Option<Value>) -> Reply {
    let body = body.map(|b| b.to_string());
    send(addr, method, path, body.as_deref().map(str::as_bytes), &[who]).await
}

async fn get(addr: SocketAddr, who: (&str, &str), path: &str) -> Reply {
    call(addr, who, "GET", path, None).await
}

async fn post(addr: SocketAddr, who: (&str, &str), path: &str, body: Value) -> Reply {
    call(addr, who, "POST", path, Some(body)).await
}

#[tokio::test]
async fn missing_or_wrong_credentials_are_401_and_health_stays_open() {
    let server = start(keyed()).await;
    let addr = server.addr;
    for (path, status) in [("/ok", 200), ("/info", 200)] {
        assert_eq!(send(addr, "GET", path, None, &[]).await.status, status, "{path}");
    }
    let missing = send(addr, "POST", "/threads", Some(b"{}"), &[]).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.detail(), "Missing authentication: an x-api-key or a bearer token");
    for wrong in [("x-api-key", "key-mallory"), ("authorization", "Bearer token-mallory")] {
        let r = send(addr, "POST", "/threads/search", Some(b"{}"), &[wrong]).await;
        assert_eq!((r.status, r.detail()), (401, "Invalid API key or token".to_owned()), "{wrong:?}");
    }
    // A scheme other than bearer is not a token.
    let basic = send(addr, "POST", "/threads", Some(b"{}"), &[("authorization", "Basic dG9rZW4tYm9i")]).await;
    assert_eq!(basic.status, 401);
    // Nothing was made by the refused requests.
    let count = post(addr, ALICE, "/threads/count", json!({})).await;
    assert_eq!((count.status, count.json()), (200, json!(0)));
    assert_eq!(post(addr, BOB, "/threads", json!({})).await.status, 200);
    // An unknown route needs credentials too (as in LangGraph), then is a 404.
    assert_eq!(send(addr, "GET", "/nowhere", None, &[]).await.status, 401);
    assert_eq!(get(addr, ALICE, "/nowhere").await.status, 404);
}

/// Sends a request's head on `stream`, then, after a pause, its body (as a client whose body is a second
/// write does); returns the answer's status and whether it says `Connection: close`.
async fn late_body(stream: &mut tokio::net::TcpStream, head: &str, body: &str) -> (u16, bool) {
    sent_late(stream, head, body, body.len()).await
}

/// [`late_body`] with a `Content-Length` of `declared` (more than `body` leaves the rest unsent).
async fn sent_late(
    stream: &mut tokio::net::TcpStream,
    head: &str,
    body: &str,
    declared: usize,
) -> (u16, bool) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let head = format!("{head}Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "the connection closed before an answer");
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).unwrap().to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
    let mut rest = vec![0u8; length];
    stream.read_exact(&mut rest).await.unwrap();
    (status, head.contains("connection: close"))
}

/// A refused request whose small body comes in a second write keeps its connection open for the next
/// request; an answer given without reading the body (an unknown route) says `Connection: close`, so
/// that no client sends a request on a connection about to close.
#[tokio::test]
async fn a_refused_request_keeps_its_connection_and_an_unread_body_closes_it() {
    let server = start(keyed()).await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let host = format!("Host: {}\r\n", server.addr);
    let wrong = format!("POST /threads/search HTTP/1.1\r\n{host}x-api-key: key-mallory\r\n");
    assert_eq!(late_body(&mut stream, &wrong, "{}").await, (401, false));
    // A refused body over 64 KiB is not waited for: answered at once, and the connection closes.
    let mut other = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let started = std::time::Instant::now();
    assert_eq!(sent_late(&mut other, &wrong, "{", 100_000).await, (401, true));
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
    let count = format!("POST /threads/count HTTP/1.1\r\n{host}x-api-key: key-alice\r\n");
    assert_eq!(late_body(&mut stream, &count, "{}").await, (200, false), "the same connection");
    let unknown = format!("POST /nowhere HTTP/1.1\r\n{host}x-api-key: key-alice\r\n");
    assert_eq!(late_body(&mut stream, &unknown, "{}").await, (404, true));
}

#[tokio::test]
async fn two_users_never_see_each_others_threads_runs_or_state() {
    let server = start(keyed()).await;
    let addr = server.addr;
    // Alice's thread, with a forged owner that the server replaces, and a finished run on it.
    let made = post(addr, ALICE, "/threads", json!({"metadata": {"owner": "bob", "topic": "x"}})).await;
    assert_eq!(made.json()["metadata"], json!({"owner": "alice", "topic": "x"}));
    let t = made.json()["thread_id"].as_str().unwrap().to_owned();
    let waited = post(
        addr,
        ALICE,
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "simple", "input": {"items": []}}),
    )
    .await;
    assert_eq!(waited.json()["items"], json!(["a", "b"]), "{}", waited.body);
    let runs = get(addr, ALICE, &format!("/threads/{t}/runs")).await.json();
    let run = runs[0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(runs[0]["metadata"]["owner"], "alice");

    let gone = format!("Thread with ID {t} not found");
    let thread_404s: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/threads/{t}"), None),
        ("PATCH", format!("/threads/{t}"), Some(json!({"metadata": {"owner": "bob"}}))),
        ("DELETE", format!("/threads/{t}"), None),
        ("GET", format!("/threads/{t}/state"), None),
        ("POST", format!("/threads/{t}/state"), Some(json!({"values": {"items": ["bob"]}, "as_node": "b"}))),
        ("GET", format!("/threads/{t}/history"), None),
        ("POST", format!("/threads/{t}/history"), Some(json!({}))),
        ("GET", format!("/threads/{t}/runs"), None),
        ("GET", format!("/threads/{t}/runs/{run}"), None),
        ("DELETE", format!("/threads/{t}/runs/{run}"), None),
        ("GET", format!("/threads/{t}/runs/{run}/join"), None),
        ("GET", format!("/threads/{t}/runs/{run}/stream"), None),
    ];
    for (method, path, body) in thread_404s {
        let r = call(addr, BOB, method, &path, body).await;
        assert_eq!((r.status, r.detail()), (404, gone.clone()), "{method} {path}: {}", r.body);
    }
    for path in
        [format!("/threads/{t}/runs"), format!("/threads/{t}/runs/wait"), format!("/threads/{t}/runs/stream")]
    {
        let r = post(addr, BOB, &path, json!({"assistant_id": "simple", "input": {"items": []}})).await;
        assert_eq!((r.status, r.detail()), (404, "Thread or assistant not found.".to_owned()), "{path}");
    }
    let copy = post(addr, BOB, &format!("/threads/{t}/copy"), json!({})).await;
    assert_eq!((copy.status, copy.detail()), (409, "Conflict".to_owned()), "LangGraph's answer to a copy");
    let cancel = post(addr, BOB, &format!("/threads/{t}/runs/{run}/cancel"), json!({})).await;
    assert_eq!(cancel.status, 404);
    let cancel = post(addr, BOB, "/runs/cancel", json!({"thread_id": t, "run_ids": [run]})).await;
    assert_eq!(cancel.status, 404);
    // Making a thread with Alice's id is a conflict, even with `do_nothing` (its existence is all it learns).
    let again = post(addr, BOB, "/threads", json!({"thread_id": t, "if_exists": "do_nothing"})).await;
    assert_eq!(again.status, 409);
    // Searches, counts and prunes see only Bob's own.
    let own = post(addr, BOB, "/threads", json!({})).await.json()["thread_id"].as_str().unwrap().to_owned();
    let found = post(addr, BOB, "/threads/search", json!({})).await.json();
    let ids: Vec<&str> = found.as_array().unwrap().iter().map(|t| t["thread_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [own.as_str()]);
    assert_eq!(post(addr, BOB, "/threads/count", json!({"metadata": {"topic": "x"}})).await.json(), json!(0));
    let pruned = post(addr, BOB, "/threads/prune", json!({"thread_ids": [t]})).await.json();
    assert_eq!(pruned, json!({"pruned_count": 0}));
    // Alice still has all of it, untouched by Bob's attempts.
    let thread = get(addr, ALICE, &format!("/threads/{t}")).await.json();
    assert_eq!(thread["metadata"]["owner"], "alice");
    assert_eq!(thread["values"]["items"], json!(["a", "b"]));
    assert_eq!(get(addr, ALICE, &format!("/threads/{t}/runs/{run}")).await.json()["status"], "success");
    assert_eq!(post(addr, ALICE, "/threads/count", json!({})).await.json(), json!(1));
    // A stateless run's thread (kept) is its caller's.
    let kept = post(
        addr,
        BOB,
        "/runs/wait",
        json!({"assistant_id": "simple", "input": {"items": []}, "on_completion": "keep"}),
    )
    .await;
    assert_eq!(kept.status, 200);
    assert_eq!(post(addr, BOB, "/threads/count", json!({})).await.json(), json!(2));
    assert_eq!(post(addr, ALICE, "/threads/count", json!({})).await.json(), json!(1));
}

#[tokio::test]
async fn assistants_are_their_makers_and_the_servers_are_everyones() {
    let server = start(keyed()).await;
    let addr = server.addr;
    let made = post(addr, ALICE, "/assistants", json!({"graph_id": "simple", "name": "mine"})).await.json();
    let a = made["assistant_id"].as_str().unwrap().to_owned();
    assert_eq!(made["metadata"]["owner"], "alice");
    for (method, path, body) in [
        ("GET", format!("/assistants/{a}"), None),
        ("GET", format!("/assistants/{a}/graph"), None),
        ("GET", format!("/assistants/{a}/schemas"), None),
        ("PATCH", format!("/assistants/{a}"), Some(json!({"name": "bob's now"}))),
        ("DELETE", format!("/assistants/{a}"), None),
        ("POST", format!("/assistants/{a}/versions"), Some(json!({}))),
        ("POST", format!("/assistants/{a}/latest"), Some(json!({"version": 1}))),
    ] {
        let r = call(addr, BOB, method, &path, body).await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let run = post(addr, BOB, "/runs/wait", json!({"assistant_id": a})).await;
    assert_eq!((run.status, run.detail()), (404, "Thread or assistant not found.".to_owned()));
    let names = |r: Reply| -> Vec<String> {
        r.json().as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect()
    };
    let bobs = names(post(addr, BOB, "/assistants/search", json!({"limit": 100})).await);
    assert!(bobs.contains(&"simple".to_owned()) && !bobs.contains(&"mine".to_owned()), "{bobs:?}");
    let alices = names(post(addr, ALICE, "/assistants/search", json!({"limit": 100})).await);
    assert!(alices.contains(&"simple".to_owned()) && alices.contains(&"mine".to_owned()), "{alices:?}");
    assert_eq!(post(addr, BOB, "/assistants/count", json!({"graph_id": "simple"})).await.json(), json!(1));
    // The server's assistant runs for both.
    assert_eq!(
        post(addr, BOB, "/runs/wait", json!({"assistant_id": "simple", "input": {"items": []}})).await.status,
        200
    );
    let patched =
        call(addr, ALICE, "PATCH", &format!("/assistants/{a}"), Some(json!({"name": "renamed"}))).await;
    assert_eq!((patched.status, patched.json()["metadata"]["owner"].clone()), (200, json!("alice")));
}

/// Polls alice's threads until one of the cron tagged `tag` has finished its run.
async fn cron_thread(addr: SocketAddr, tag: &str) -> Value {
    for _ in 0..200 {
        let found =
            post(addr, ALICE, "/threads/search", json!({"metadata": {"tag": tag}, "status": "idle"})).await;
        if let Some(thread) = found.json().as_array().and_then(|t| t.first().cloned()) {
            return thread;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no thread of the cron tagged {tag}");
}

#[tokio::test]
async fn crons_are_their_makers_and_run_as_them() {
    let server = start(keyed()).await;
    let addr = server.addr;
    let made = post(
        addr,
        ALICE,
        "/runs/crons",
        json!({"assistant_id": "simple", "schedule": "* * * * * *", "input": {"items": []},
               "metadata": {"owner": "bob", "tag": "c1"}, "on_run_completed": "keep"}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let cron = made.json();
    let c = cron["cron_id"].as_str().unwrap().to_owned();
    assert_eq!(
        (cron["user_id"].clone(), cron["metadata"].clone()),
        (json!("alice"), json!({"owner": "alice", "tag": "c1"}))
    );
    assert_eq!(
        cron["payload"]["metadata"],
        json!({"owner": "alice", "tag": "c1"}),
        "the payload's metadata too"
    );

    // Bob finds nothing of it: not by id, not by search or count, and cannot change or delete it.
    assert_eq!(get(addr, BOB, &format!("/runs/crons/{c}")).await.status, 404);
    let r = call(addr, BOB, "PATCH", &format!("/runs/crons/{c}"), Some(json!({"enabled": false}))).await;
    assert_eq!((r.status, r.detail()), (404, format!("Cron '{c}' not found")));
    assert_eq!(call(addr, BOB, "DELETE", &format!("/runs/crons/{c}"), None).await.status, 404);
    assert_eq!(post(addr, BOB, "/runs/crons/search", json!({})).await.json(), json!([]));
    assert_eq!(post(addr, BOB, "/runs/crons/count", json!({})).await.json(), json!(0));
    assert_eq!(post(addr, ALICE, "/runs/crons/count", json!({})).await.json(), json!(1));
    assert_eq!(get(addr, ALICE, &format!("/runs/crons/{c}")).await.json()["cron_id"], json!(c));

    // Its runs are alice's: the thread it makes, and the user in the run's configuration.
    let thread = cron_thread(addr, "c1").await;
    let t = thread["thread_id"].as_str().unwrap();
    assert_eq!(thread["metadata"]["owner"], "alice", "{thread}");
    assert_eq!(thread["values"]["items"], json!(["a", "b"]));
    let runs = get(addr, ALICE, &format!("/threads/{t}/runs")).await.json();
    let configurable = &runs[0]["kwargs"]["config"]["configurable"];
    assert_eq!(configurable["langgraph_auth_user_id"], "alice", "{runs}");
    assert_eq!(configurable["langgraph_auth_user"]["identity"], "alice");
    assert_eq!(configurable["cron_id"], json!(c));
    assert_eq!(get(addr, BOB, &format!("/threads/{t}")).await.status, 404);
    assert_eq!(post(addr, BOB, "/threads/count", json!({})).await.json(), json!(0));

    // Alice stops it; the owner stays hers whatever the patch says.
    let r = call(
        addr,
        ALICE,
        "PATCH",
        &format!("/runs/crons/{c}"),
        Some(json!({"enabled": false, "metadata": {"owner": "bob"}})),
    )
    .await;
    assert_eq!((r.status, r.json()["metadata"]["owner"].clone()), (200, json!("alice")), "{}", r.body);

    // Bob may not put a cron on alice's thread, nor on her assistant; on his own thread he may.
    let a = post(addr, ALICE, "/assistants", json!({"graph_id": "simple"})).await.json();
    let a = a["assistant_id"].as_str().unwrap();
    let r = post(
        addr,
        BOB,
        &format!("/threads/{t}/runs/crons"),
        json!({"assistant_id": "simple", "schedule": "0 9 * * *"}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.detail().starts_with(&format!("Thread with ID '{t}' not found")), "{}", r.detail());
    let r = post(addr, BOB, "/runs/crons", json!({"assistant_id": a, "schedule": "0 9 * * *"})).await;
    assert_eq!((r.status, r.detail()), (404, format!("Assistant '{a}' not found")));
    let bobs = post(addr, BOB, "/threads", json!({})).await.json();
    let bt = bobs["thread_id"].as_str().unwrap();
    let r = post(
        addr,
        BOB,
        &format!("/threads/{bt}/runs/crons"),
        json!({"assistant_id": "simple", "schedule": "0 9 * * *"}),
    )
    .await;
    assert_eq!((r.status, r.json()["user_id"].clone()), (200, json!("bob")), "{}", r.body);
    let found = post(addr, BOB, "/runs/crons/search", json!({"thread_id": bt})).await.json();
    assert_eq!(found.as_array().map(Vec::len), Some(1));
    // Alice deletes hers; it is gone for her too.
    assert_eq!(call(addr, ALICE, "DELETE", &format!("/runs/crons/{c}"), None).await.status, 204);
    assert_eq!(post(addr, ALICE, "/runs/crons/count", json!({})).await.json(), json!(0));
}

#[test]
fn a_crons_owner_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("weft-server-cron-owner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("server.db");
    let server = || keyed().sqlite(&db);
    let cron_id = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = start(server()).await;
        let body = json!({"assistant_id": "simple", "schedule": "* * * * * *", "input": {"items": []},
                          "metadata": {"tag": "c2"}, "on_run_completed": "keep", "enabled": false});
        let cron = post(s.addr, ALICE, "/runs/crons", body).await.json();
        cron["cron_id"].as_str().unwrap().to_owned()
    });
    let thread = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let s = start(server()).await;
        assert_eq!(get(s.addr, BOB, &format!("/runs/crons/{cron_id}")).await.status, 404);
        let r =
            call(s.addr, ALICE, "PATCH", &format!("/runs/crons/{cron_id}"), Some(json!({"enabled": true})))
                .await;
        assert_eq!((r.status, r.json()["user_id"].clone()), (200, json!("alice")), "{}", r.body);
        let thread = cron_thread(s.addr, "c2").await;
        call(s.addr, ALICE, "DELETE", &format!("/runs/crons/{cron_id}"), None).await;
        thread
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(thread["metadata"]["owner"], "alice", "{thread}");
}

/// Users by bearer token; `readonly` may read but not write; every user has store namespaces of its own
/// and sees only threads of its team.
#[derive(Debug)]
struct Teams;

#[async_trait]
impl Auth for Teams {
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<User, AuthError> {
        let (identity, team) = match request.bearer_token() {
            Some("t-ann") => ("ann", "red"),
            Some("t-ben") => ("ben", "red"),
            Some("t-cat") => ("cat", "blue"),
            Some("t-readonly") => ("readonly", "red"),
            _ => return Err(AuthError::unauthorized("who are you?")),
        };
        let permissions: &[&str] = if identity == "readonly" { &["read"] } else { &["read", "write"] };
        Ok(User::new(identity).with_permissions(permissions.iter().copied()).with_field("team", json!(team)))
    }

    async fn authorize(&self, ctx: &AuthContext<'_>, value: &mut Value) -> Result<Option<Filter>, AuthError> {
        let writes =
            !matches!(ctx.action, Action::Read | Action::Search | Action::Get | Action::ListNamespaces);
        if writes && !ctx.user.permissions().iter().any(|p| p == "write") {
            return Err(AuthError::forbidden("Forbidden"));
        }
        let team = ctx.user.field("team").cloned().unwrap_or(Value::Null);
        match ctx.resource {
            Resource::Store => {
                let namespace = value["namespace"].as_array().cloned().unwrap_or_default();
                let mut own = vec![json!(ctx.user.identity())];
                own.extend(namespace);
                value["namespace"] = Value::Array(own);
                Ok(None)
            }
            _ => {
                if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.insert("team".into(), team.clone());
                } else if matches!(ctx.action, Action::Create | Action::CreateRun) {
                    value["metadata"] = json!({"team": team});
                }
                Ok(Some(Filter::from_json(json!({"$or": [{"team": team}, {"created_by": "system"}]}))?))
            }
        }
    }
}

#[tokio::test]
async fn a_custom_hook_authenticates_filters_forbids_and_rewrites_namespaces() {
    let server = start(builder().auth(Teams)).await;
    let addr = server.addr;
    let (ann, ben, cat, readonly) = (
        ("authorization", "Bearer t-ann"),
        ("authorization", "Bearer t-ben"),
        ("authorization", "Bearer t-cat"),
        ("authorization", "Bearer t-readonly"),
    );
    let who = send(addr, "POST", "/threads", Some(b"{}"), &[]).await;
    assert_eq!((who.status, who.detail()), (401, "who are you?".to_owned()));
    let t = post(addr, ann, "/threads", json!({})).await.json()["thread_id"].as_str().unwrap().to_owned();
    // A teammate sees it, another team does not, and the read-only user may read but not write.
    assert_eq!(get(addr, ben, &format!("/threads/{t}")).await.json()["metadata"], json!({"team": "red"}));
    assert_eq!(get(addr, cat, &format!("/threads/{t}")).await.status, 404);
    assert_eq!(get(addr, readonly, &format!("/threads/{t}")).await.status, 200);
    let denied = post(addr, readonly, "/threads", json!({})).await;
    assert_eq!((denied.status, denied.detail()), (403, "Forbidden".to_owned()));
    let denied = post(
        addr,
        readonly,
        &format!("/threads/{t}/runs"),
        json!({"assistant_id": "simple", "input": {"items": []}}),
    )
    .await;
    assert_eq!(denied.status, 403);
    assert!(get(addr, ann, &format!("/threads/{t}/runs")).await.json().as_array().unwrap().is_empty());
    // The run's config carries the user, as LangGraph's does.
    let run = post(
        addr,
        ben,
        &format!("/threads/{t}/runs"),
        json!({"assistant_id": "simple", "input": {"items": []}}),
    )
    .await
    .json();
    let configurable = &run["kwargs"]["config"]["configurable"];
    assert_eq!(configurable["langgraph_auth_user_id"], "ben", "{run}");
    assert_eq!(configurable["langgraph_auth_permissions"], json!(["read", "write"]));
    // Store items live under each user's own namespace.
    let put = json!({"namespace": ["notes"], "key": "k", "value": {"by": "ann"}});
    assert_eq!(call(addr, ann, "PUT", "/store/items", Some(put)).await.status, 204);
    let ann_item = get(addr, ann, "/store/items?namespace=notes&key=k").await.json();
    assert_eq!(
        (ann_item["value"].clone(), ann_item["namespace"].clone()),
        (json!({"by": "ann"}), json!(["ann", "notes"]))
    );
    assert_eq!(get(addr, ben, "/store/items?namespace=notes&key=k").await.json(), Value::Null);
    let found = post(addr, ben, "/store/items/search", json!({"namespace_prefix": ["notes"]})).await.json();
    assert_eq!(found, json!({"items": []}));
    let namespaces = post(addr, ann, "/store/namespaces", json!({})).await.json();
    assert_eq!(namespaces, json!({"namespaces": [["ann", "notes"]]}));
    let denied =
        call(addr, readonly, "DELETE", "/store/items", Some(json!({"namespace": ["notes"], "key": "k"})))
            .await;
    assert_eq!(denied.status, 403);
    assert_eq!(get(addr, ann, "/store/items?namespace=notes&key=k").await.status, 200);
}

#[derive(Debug)]
struct BadFilter;

#[async_trait]
impl Auth for BadFilter {
    async fn authenticate(&self, _: &AuthRequest<'_>) -> Result<User, AuthError> {
        Ok(User::new("anyone"))
    }

    async fn authorize(&self, _: &AuthContext<'_>, _: &mut Value) -> Result<Option<Filter>, AuthError> {
        Ok(Some(Filter::from_json(json!({"owner": {"$gt": 1}}))?))
    }
}

#[tokio::test]
async fn a_hooks_invalid_filter_is_a_500_and_changes_nothing() {
    let server = start(builder().auth(BadFilter)).await;
    let r = post(server.addr, ("x-api-key", "k"), "/threads", json!({})).await;
    assert_eq!(r.status, 500);
    assert!(r.detail().contains("'owner'"), "{}", r.detail());
    let count = post(server.addr, ("x-api-key", "k"), "/threads/count", json!({})).await;
    assert_eq!(count.status, 500);
}

#[tokio::test]
async fn auth_settings_are_checked_at_start() {
    let both = builder().api_keys([("k", "u")]).auth(Teams).build().await;
    assert!(matches!(both, Err(ServerError::AuthConflict)), "{both:?}");
    // Without auth, an address other machines reach is refused unless allowed.
    let server = builder().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = server.serve_with_shutdown(listener, async {}).await;
    assert!(matches!(refused, Err(ServerError::Unauthenticated { .. })), "{refused:?}");
    let server = keyed().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    assert!(server.serve_with_shutdown(listener, async {}).await.is_ok());
    let server = builder().allow_unauthenticated().build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    assert!(server.serve_with_shutdown(listener, async {}).await.is_ok());
}

#[tokio::test]
async fn a_run_past_the_timeout_ends_as_timeout() {
    let server = start(builder().run_timeout(Duration::from_millis(300))).await;
    let addr = server.addr;
    let t = common::thread(addr).await;
    let body = json!({"assistant_id": "slow", "input": {"delay": 5}});
    let started = std::time::Instant::now();
    let answer = common::post(addr, &format!("/threads/{t}/runs/wait"), body).await.json();
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert_eq!(answer["__error__"]["error"], "TimeoutError", "{answer}");
    let runs = common::get(addr, &format!("/threads/{t}/runs")).await.json();
    assert_eq!(runs[0]["status"], "timeout");
    let thread = common::get(addr, &format!("/threads/{t}")).await.json();
    assert_eq!(thread["status"], "error");
    // A run within the limit is untouched.
    let t = common::thread(addr).await;
    let quick = common::post(
        addr,
        &format!("/threads/{t}/runs/wait"),
        json!({"assistant_id": "simple", "input": {"items": []}}),
    )
    .await;
    assert_eq!(quick.json()["items"], json!(["a", "b"]));
}

#[tokio::test]
async fn runs_beyond_max_concurrent_runs_wait_pending() {
    let server = start(builder().max_concurrent_runs(1)).await;
    let addr = server.addr;
    let (t1, t2) = (common::thread(addr).await, common::thread(addr).await);
    let slow = json!({"assistant_id": "slow", "input": {"delay": 0.6}});
    let first = common::post(addr, &format!("/threads/{t1}/runs"), slow.clone()).await.json();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = common::post(addr, &format!("/threads/{t2}/runs"), slow).await.json();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let status = |t: &str, r: &Value| format!("/threads/{t}/runs/{}", r["run_id"].as_str().unwrap());
    assert_eq!(common::get(addr, &status(&t1, &first)).await.json()["status"], "running");
    assert_eq!(common::get(addr, &status(&t2, &second)).await.json()["status"], "pending");
    let joined = common::get(addr, &format!("{}/join", status(&t2, &second))).await.json();
    assert_eq!(joined["items"], json!(["slept", "b"]));
    assert_eq!(common::get(addr, &status(&t1, &first)).await.json()["status"], "success");
}
