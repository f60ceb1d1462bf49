//! Adaptive RAG: route a question to a vector store or the web, keep only relevant documents, rewrite the
//! query when none are, and check the answer against the documents before giving it.
//!
//! This is LangGraph's Adaptive RAG tutorial (routing, document grading, query rewriting, hallucination
//! grading), every loop bounded:
//!
//! ```text
//! START → route_question ─┬─vectorstore─→ retrieve → grade_documents ─relevant─→ generate ⇄ grade_answer → END
//!                         │                  ↑             │ none relevant         (again while not grounded,
//!                         │                  └── transform_query (≤ MAX_REWRITES)   at most MAX_ANSWERS answers)
//!                         │                                │ none after the last rewrite
//!                         └─web_search──→ web_search ←─────┘ ───────────────────→ generate
//! ```
//!
//! - `route_question` asks a router model for a `RouteQuery` (structured output) and returns a `Command`
//!   that records the route and goes to `retrieve` or `web_search`.
//! - `retrieve` searches weft's store: the knowledge base is filed in an `InMemoryStore` with a vector
//!   index, and the query is ranked by similarity (embeddings from [`weft_examples::WordEmbeddings`],
//!   which need no model).
//! - `grade_documents` asks a grader, once per document and concurrently (`batch`), whether it is
//!   relevant, and keeps those that are. None relevant: `transform_query` asks a rewriter for a better
//!   query and retrieval runs again; after `MAX_REWRITES` rewrites the question goes to the web.
//! - `web_search` calls the `web_search` tool (a `#[tool]` function: a local stand-in for a search API,
//!   with canned pages).
//! - `generate` answers from the documents; `grade_answer` asks a hallucination grader whether the
//!   answer is grounded in them. Not grounded: generate again, at most `MAX_ANSWERS` answers in all.
//!
//! Three questions run: one about weft (the vector store; its first query finds nothing relevant and is
//! rewritten, its first answer is not grounded and is regenerated), one about current events (the web),
//! and one about weft that the notes do not cover (rewritten until the bound, then sent to the web).
//! The models come from [`weft_examples::Models`]: scripted, with exact checks of every step; on a live
//! model only the protocol is checked (the route is allowed, the loops stayed within their bounds, an
//! answer was given).
//!
//! Run it from the repository root: `cargo run --example rag_agent`.

use std::sync::Arc;

use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::graph::store::SearchOptions;
use weft::graph::{CompiledGraph, InMemoryStore, IndexConfig, Store};
use weft::prelude::*;
use weft::{ToolCallOutput, ToolContext, invoke_tool};
use weft_examples::{ExampleModel, Models, WordEmbeddings, structured};

/// Rewrites of the query before giving up on the vector store.
const MAX_REWRITES: u32 = 2;
/// Answers generated before giving up on a grounded one.
const MAX_ANSWERS: u32 = 3;
/// Documents retrieved per search.
const TOP_K: usize = 3;
/// Components of the embedding vectors.
const DIMS: usize = 1024;

/// Where a question is answered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Datasource {
    /// The vector store of documents about weft.
    Vectorstore,
    /// A web search.
    WebSearch,
}

/// Routes a user question to the most relevant datasource.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct RouteQuery {
    /// `vectorstore` for questions about weft (graphs, checkpoints, streaming, the store, ...), else
    /// `web_search`.
    datasource: Datasource,
}

/// Whether a retrieved document is relevant to the question.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct GradeDocument {
    /// True if the document helps answer the question.
    relevant: bool,
}

/// Whether an answer is grounded in the documents.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct GradeAnswer {
    /// True if every claim of the answer is supported by the documents.
    grounded: bool,
}

/// A document: from the knowledge base or a web page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Document {
    /// The store key or the page's address.
    source: String,
    text: String,
    /// The similarity to the query, for documents from the vector store.
    score: Option<f64>,
}

/// The graph's state.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Rag {
    question: String,
    /// What the retriever searches for: the question, then its rewrites.
    query: String,
    route: Option<Datasource>,
    documents: Vec<Document>,
    answer: Option<String>,
    grounded: bool,
    rewrites: u32,
    answers: u32,
}

/// The knowledge base: short notes about weft, filed in the store under `["docs"]`.
const KNOWLEDGE: [(&str, &str); 6] = [
    (
        "checkpoints",
        "A checkpointer saves the graph state after every superstep, so a thread can resume from its \
         last checkpoint after a crash or a restart.",
    ),
    ("send", "Send starts one task per packet in the next superstep: the map step of a map-reduce."),
    ("interrupts", "interrupt() pauses a node until a human answers; Command::resume continues the thread."),
    (
        "store",
        "The store is long-term memory shared by threads: namespaced items with optional vector search.",
    ),
    (
        "streaming",
        "Streaming modes show values, node updates, model tokens, custom data and tasks as they happen.",
    ),
    (
        "reducers",
        "Each state field is a channel with a reducer: last value, append, add_messages or a function.",
    ),
];

/// A page of the stand-in web.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Page {
    url: String,
    text: String,
}

/// The stand-in web: canned pages.
const WEB: [(&str, &str); 3] = [
    (
        "https://example.org/cycling/tour-de-france-2024",
        "Tadej Pogacar won the 2024 Tour de France, his third Tour victory, ahead of Jonas Vingegaard.",
    ),
    (
        "https://example.org/weather/oslo",
        "Oslo weather: light snow in the morning, clearing in the afternoon.",
    ),
    (
        "https://example.org/rust/1-80",
        "Rust 1.80 stabilised LazyCell and LazyLock and exclusive ranges in patterns.",
    ),
];

/// Searches the web and returns the best matching pages, best first (at most two).
///
/// A local stand-in for a search API: it ranks canned pages by the words they share with the query.
#[tool]
fn web_search(
    /// What to search for.
    query: String,
) -> Vec<Page> {
    let wanted = WordEmbeddings::words(&query);
    let mut hits: Vec<(usize, Page)> = WEB
        .iter()
        .map(|(url, text)| {
            let words = WordEmbeddings::words(text);
            let shared = wanted.iter().filter(|w| words.contains(w)).count();
            (shared, Page { url: (*url).to_owned(), text: (*text).to_owned() })
        })
        .filter(|(shared, _)| *shared > 0)
        .collect();
    hits.sort_by_key(|(shared, _)| std::cmp::Reverse(*shared));
    hits.into_iter().take(2).map(|(_, page)| page).collect()
}

/// The models of the five roles, with their scripts for both questions.
struct Roles {
    router: ExampleModel,
    grader: ExampleModel,
    rewriter: ExampleModel,
    writer: ExampleModel,
    checker: ExampleModel,
}

/// The rewrite of the first question and the answers the writer gives on the script.
const REWRITE: &str = "How does a thread resume from its last checkpoint after a restart?";
const UNGROUNDED: &str = "weft replays the whole conversation from the first message on another server.";
const GROUNDED: &str =
    "A checkpointer saves the state after every superstep, so the thread resumes from its last checkpoint.";
const TOUR: &str = "Tadej Pogacar won the 2024 Tour de France, ahead of Jonas Vingegaard.";
const DRAW_REWRITES: [&str; 2] =
    ["How to render a weft graph as a Mermaid diagram?", "weft graph drawing Mermaid"];
const DONT_KNOW: &str = "I don't know: neither the notes nor the web say how to draw a graph.";

fn roles(models: &Models) -> Roles {
    let route = |datasource| structured(&RouteQuery { datasource });
    let relevant = |relevant| structured(&GradeDocument { relevant });
    let grounded = |grounded| structured(&GradeAnswer { grounded });
    Roles {
        router: models.chat_model(
            "router",
            [Datasource::Vectorstore, Datasource::WebSearch, Datasource::Vectorstore].map(route),
        ),
        // Question 1: first search, none of three relevant; after the rewrite, the first of three is.
        // Question 3: none relevant in three searches.
        grader: models.chat_model(
            "grader",
            [[false; 3], [true, false, false], [false; 3], [false; 3], [false; 3]]
                .concat()
                .into_iter()
                .map(relevant),
        ),
        rewriter: models.chat_model("rewriter", [REWRITE, DRAW_REWRITES[0], DRAW_REWRITES[1]]),
        writer: models.chat_model("writer", [UNGROUNDED, GROUNDED, TOUR, DONT_KNOW]),
        checker: models.chat_model("checker", [false, true, true, true].map(grounded)),
    }
}

/// The documents most similar to `query` in the store's `["docs"]` namespace.
async fn retrieve(store: &dyn Store, query: &str) -> weft::Result<Vec<Document>> {
    let hits = store
        .search(&["docs".to_owned()], SearchOptions::default().query(query).limit(TOP_K))
        .await
        .map_err(Error::custom)?;
    Ok(hits
        .into_iter()
        .map(|hit| {
            let text = hit.item.value["text"].as_str().unwrap_or_default().to_owned();
            Document { source: hit.item.key, text, score: hit.score }
        })
        .collect())
}

/// The documents as one block of text for a prompt.
fn context(documents: &[Document]) -> String {
    documents.iter().map(|d| format!("[{}] {}", d.source, d.text)).collect::<Vec<_>>().join("\n")
}

/// The graph.
fn build(roles: &Roles) -> weft::Result<StateGraph<Rag>> {
    let mut graph = StateGraph::<Rag>::new();
    add_router(&mut graph, roles)?;
    add_graders(&mut graph, roles)?;
    add_writers(&mut graph, roles)?;
    graph.add_node("retrieve", |state: Rag, rt: Runtime| async move {
        let store =
            rt.store().cloned().ok_or_else(|| Error::msg("the graph was compiled without a store"))?;
        let documents = retrieve(store.as_ref(), &state.query).await?;
        Ok::<_, weft::Error>(Rag::update().documents(documents))
    });
    graph.add_node("web_search", |state: Rag, rt: Runtime| async move {
        let call = ToolCall { name: "web_search".into(), args: json!({"query": state.query}), id: None };
        let ToolCallOutput::Message(result) =
            invoke_tool(&web_search, call, ToolContext::new(rt.config().clone())).await?
        else {
            return Err(Error::msg("web_search returned a command"));
        };
        let pages: Vec<Page> = serde_json::from_str(&result.content.text())?;
        let documents: Vec<Document> =
            pages.into_iter().map(|p| Document { source: p.url, text: p.text, score: None }).collect();
        Ok::<_, weft::Error>(Rag::update().documents(documents))
    });

    graph.add_edge(START, "route_question");
    graph.add_edge("retrieve", "grade_documents");
    graph.add_conditional_edges(
        "grade_documents",
        |state: &Rag| match (state.documents.is_empty(), state.rewrites < MAX_REWRITES) {
            (false, _) => "generate",
            (true, true) => "transform_query",
            (true, false) => "web_search",
        },
        ["generate", "transform_query", "web_search"],
    );
    graph.add_edge("transform_query", "retrieve");
    graph.add_edge("web_search", "generate");
    graph.add_edge("generate", "grade_answer");
    graph.add_conditional_edges(
        "grade_answer",
        |state: &Rag| if state.grounded || state.answers >= MAX_ANSWERS { END } else { "generate" },
        None,
    );
    Ok(graph)
}

/// `route_question`: vector store or web search, as the router model decides.
fn add_router(graph: &mut StateGraph<Rag>, roles: &Roles) -> weft::Result<()> {
    let route =
        ChatPromptTemplate::from_messages([
            (
                "system",
                "You route a user question to a vector store or to web search. The vector store holds notes \
             about weft, a framework for LLM graphs: checkpoints, Send, interrupts, the store, streaming, \
             reducers. Use it for questions on those topics; use web search for anything else.",
            ),
            ("human", "{question}"),
        ])? | roles.router.clone().with_structured_output::<RouteQuery>(roles.router.structured_method());
    graph.add_node("route_question", move |state: Rag, rt: Runtime| {
        let route = route.clone();
        async move {
            let decision = route.invoke(json!({"question": state.question}), rt.config()).await?;
            let next = match decision.datasource {
                Datasource::Vectorstore => "retrieve",
                Datasource::WebSearch => "web_search",
            };
            let update = Rag::update().route(decision.datasource).query(state.question.clone());
            Ok::<_, weft::Error>(Command::new().update(update).goto(next))
        }
    });
    Ok(())
}

/// `grade_documents` (one grader call per retrieved document) and `grade_answer` (is it grounded?).
fn add_graders(graph: &mut StateGraph<Rag>, roles: &Roles) -> weft::Result<()> {
    let grade =
        ChatPromptTemplate::from_messages([
            (
                "system",
                "You grade whether a retrieved document is relevant to a user question: relevant if it \
             holds facts that help answer it. A loose test; it only weeds out wrong retrievals.",
            ),
            ("human", "Document:\n{document}\n\nQuestion: {question}"),
        ])? | roles.grader.clone().with_structured_output::<GradeDocument>(roles.grader.structured_method());
    let check =
        ChatPromptTemplate::from_messages([
            (
                "system",
                "You check whether an answer is grounded in a set of facts: every claim it makes must be \
             supported by them.",
            ),
            ("human", "Facts:\n{context}\n\nAnswer: {answer}"),
        ])? | roles.checker.clone().with_structured_output::<GradeAnswer>(roles.checker.structured_method());

    graph.add_node("grade_documents", move |state: Rag, rt: Runtime| {
        let grade = grade.clone();
        async move {
            let inputs: Vec<_> = state
                .documents
                .iter()
                .map(|d| json!({"document": d.text, "question": state.question}))
                .collect();
            // One grader call per document, run concurrently; the grades come back in input order.
            let grades = grade.batch(inputs, rt.config()).await?;
            let kept: Vec<Document> =
                state.documents.into_iter().zip(grades).filter(|(_, g)| g.relevant).map(|(d, _)| d).collect();
            Ok::<_, weft::Error>(Rag::update().documents(kept))
        }
    });
    graph.add_node("grade_answer", move |state: Rag, rt: Runtime| {
        let check = check.clone();
        async move {
            let input = json!({"context": context(&state.documents), "answer": state.answer});
            let verdict = check.invoke(input, rt.config()).await?;
            Ok::<_, weft::Error>(Rag::update().grounded(verdict.grounded))
        }
    });
    Ok(())
}

/// `transform_query` (a better query for the vector store) and `generate` (the answer from the context).
fn add_writers(graph: &mut StateGraph<Rag>, roles: &Roles) -> weft::Result<()> {
    let rewrite = ChatPromptTemplate::from_messages([
        (
            "system",
            "You rewrite a question into a better query for a vector store of technical notes: keep its \
             intent, use the words such notes would use. Answer with the query only.",
        ),
        ("human", "{question}"),
    ])? | roles.rewriter.clone()
        | StrOutputParser;
    let write = ChatPromptTemplate::from_messages([
        (
            "system",
            "Answer the question from the context only, in at most two sentences. If the context does \
             not say, say that you don't know.",
        ),
        ("human", "Context:\n{context}\n\nQuestion: {question}"),
    ])? | roles.writer.clone()
        | StrOutputParser;
    graph.add_node("transform_query", move |state: Rag, rt: Runtime| {
        let rewrite = rewrite.clone();
        async move {
            let query = rewrite.invoke(json!({"question": state.question}), rt.config()).await?;
            Ok::<_, weft::Error>(Rag::update().query(query).rewrites(state.rewrites + 1))
        }
    });
    graph.add_node("generate", move |state: Rag, rt: Runtime| {
        let write = write.clone();
        async move {
            let input = json!({"context": context(&state.documents), "question": state.question});
            let answer = write.invoke(input, rt.config()).await?;
            Ok::<_, weft::Error>(Rag::update().answer(answer).answers(state.answers + 1))
        }
    });
    Ok(())
}

/// Asks one question, printing each step as it finishes; returns the final state and the path taken.
async fn ask(app: &CompiledGraph<Rag>, question: &str) -> weft::Result<(Rag, Vec<String>)> {
    println!("\nquestion: {question}");
    let input = Rag::update().question(question.to_owned());
    let mut parts = app.stream(input, &RunnableConfig::default(), &[StreamMode::Updates, StreamMode::Values]);
    let (mut path, mut last) = (Vec::new(), None);
    while let Some(part) = parts.next().await {
        match part?.data {
            StreamData::Updates { node, updates, .. } => {
                let said = updates.iter().map(summary).collect::<Vec<_>>().join(", ");
                println!("  {node}: {said}");
                path.push(node);
            }
            StreamData::Values { state, .. } => last = Some(state),
            _ => {}
        }
    }
    let state = last.ok_or_else(|| Error::msg("the run streamed no state"))?;
    Ok((state, path))
}

/// A one-line summary of a node's update.
fn summary(update: &RagUpdate) -> String {
    let mut parts = Vec::new();
    if let Some(Some(route)) = update.route {
        parts.push(format!("route {}", serde_json::to_string(&route).unwrap_or_default()));
    }
    if let Some(query) = &update.query {
        parts.push(format!("query {query:?}"));
    }
    if let Some(documents) = &update.documents {
        let listed: Vec<String> = documents
            .iter()
            .map(|d| match d.score {
                Some(score) => format!("{} ({score:.2})", d.source),
                None => d.source.clone(),
            })
            .collect();
        parts.push(format!("documents [{}]", listed.join(", ")));
    }
    if let Some(Some(answer)) = &update.answer {
        parts.push(format!("answer {answer:?}"));
    }
    if let Some(grounded) = update.grounded {
        parts.push(if grounded { "grounded".to_owned() } else { "NOT grounded".to_owned() });
    }
    parts.join(", ")
}

/// What holds on any model: an allowed route taken, loops within their bounds, an answer given.
fn check_protocol(state: &Rag, path: &[String]) {
    let first_hop = match state.route {
        Some(Datasource::Vectorstore) => "retrieve",
        Some(Datasource::WebSearch) => "web_search",
        None => "",
    };
    assert_eq!(path.first().map(String::as_str), Some("route_question"));
    assert_eq!(path.get(1).map(String::as_str), Some(first_hop), "the route decides the first hop");
    assert_eq!(path.last().map(String::as_str), Some("grade_answer"), "every answer is checked");
    assert!(state.rewrites <= MAX_REWRITES && (1..=MAX_ANSWERS).contains(&state.answers));
    assert!(state.grounded || state.answers == MAX_ANSWERS, "an ungrounded answer ends only at the bound");
    if state.route == Some(Datasource::Vectorstore) && path.iter().any(|node| node == "web_search") {
        assert_eq!(state.rewrites, MAX_REWRITES, "the web is the fallback only after the last rewrite");
    }
    assert!(!state.answer.clone().unwrap_or_default().trim().is_empty(), "an answer was given");
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    let models = Models::from_env();
    let roles = roles(&models);

    // The knowledge base: each note filed in the store, its `text` embedded for vector search.
    let embeddings = Arc::new(WordEmbeddings::new(DIMS));
    let store = InMemoryStore::new().with_index(IndexConfig::new(DIMS, embeddings).with_fields(["text"]));
    for (key, text) in KNOWLEDGE {
        store.put(&["docs".to_owned()], key, json!({"text": text})).await.map_err(Error::custom)?;
    }
    let store: Arc<dyn Store> = Arc::new(store);
    let app = build(&roles)?.compile_with(CompileConfig::new().store(store))?;

    // A question about weft: the vector store, a rewrite, a regenerated answer.
    let (weft_q, path) =
        ask(&app, "My agent died when the server rebooted. Can it pick up where it stopped?").await?;
    check_protocol(&weft_q, &path);
    models.expect_eq("the route", weft_q.route, Some(Datasource::Vectorstore));
    models.expect_eq(
        "the path",
        &path,
        &[
            "route_question",
            "retrieve",
            "grade_documents",
            "transform_query",
            "retrieve",
            "grade_documents",
            "generate",
            "grade_answer",
            "generate",
            "grade_answer",
        ],
    );
    models.expect_eq("the rewritten query", weft_q.query.as_str(), REWRITE);
    let sources: Vec<&str> = weft_q.documents.iter().map(|d| d.source.as_str()).collect();
    models.expect_eq("the documents kept", sources, ["checkpoints"]);
    models.expect_eq("the answer", weft_q.answer.as_deref(), Some(GROUNDED));
    // The grader judged each retrieved note against the question; the checker saw the kept note.
    let graded: Vec<String> = roles.grader.prompts().iter().map(|p| p[1].text()).collect();
    models.expect_eq("grader calls", graded.len(), 2 * TOP_K);
    models.expect_eq(
        "the 4th grading is the checkpoints note",
        graded.get(3).is_some_and(|g| g.contains("A checkpointer saves")),
        true,
    );
    let checked = roles.checker.prompts().first().map(|p| p[1].text()).unwrap_or_default();
    models.expect_eq("the checker saw the first answer", checked.ends_with(UNGROUNDED), true);

    // A question about current events: the web.
    let (tour, path) = ask(&app, "Who won the 2024 Tour de France?").await?;
    check_protocol(&tour, &path);
    models.expect_eq("the route", tour.route, Some(Datasource::WebSearch));
    models.expect_eq("the path", &path, &["route_question", "web_search", "generate", "grade_answer"]);
    let sources: Vec<&str> = tour.documents.iter().map(|d| d.source.as_str()).collect();
    models.expect_eq("the pages found", sources, [WEB[0].0]);
    models.expect_eq("the answer", tour.answer.as_deref(), Some(TOUR));

    // A question about weft the notes do not cover: rewritten until the bound, then the web, which has
    // nothing either; the answer says so.
    let (draw, path) = ask(&app, "Can I draw my graph as a picture?").await?;
    check_protocol(&draw, &path);
    models.expect_eq("the route", draw.route, Some(Datasource::Vectorstore));
    models.expect_eq(
        "the path",
        &path,
        &[
            "route_question",
            "retrieve",
            "grade_documents",
            "transform_query",
            "retrieve",
            "grade_documents",
            "transform_query",
            "retrieve",
            "grade_documents",
            "web_search",
            "generate",
            "grade_answer",
        ],
    );
    models.expect_eq("the web search used the last rewrite", draw.query.as_str(), DRAW_REWRITES[1]);
    models.expect_eq("nothing found", draw.documents.len(), 0);
    models.expect_eq("the answer", draw.answer.as_deref(), Some(DONT_KNOW));

    println!("\nanswers:");
    for state in [weft_q, tour, draw] {
        println!("  {}", state.answer.unwrap_or_default());
    }
    println!("rag_agent: all checks passed");
    Ok(())
}
