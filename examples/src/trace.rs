//! How the examples start and end: trace export when `WEFT_OTEL_ENDPOINT` is set, and errors printed as
//! readable chains.

/// The examples' trace export, running while this value lives (see [`otel_from_env`]).
#[derive(Debug)]
pub struct Traces {
    #[cfg(feature = "otel")]
    _guard: weft::otel::OtelGuard,
}

/// Exports the example's spans over OTLP to `WEFT_OTEL_ENDPOINT` (for example Arize Phoenix at
/// `http://127.0.0.1:6006`), into the Phoenix project `WEFT_OTEL_PROJECT` when set, with prompts and
/// completions when `WEFT_OTEL_CONTENT=1`. Returns `None` when the variable is not set; keep the value
/// until the example ends, so that its last spans are sent. The export needs this package's `otel`
/// feature: without it, a set `WEFT_OTEL_ENDPOINT` is an error that says so.
pub fn otel_from_env() -> weft::Result<Option<Traces>> {
    let Ok(endpoint) = std::env::var("WEFT_OTEL_ENDPOINT") else { return Ok(None) };
    export(&endpoint).map(Some)
}

#[cfg(feature = "otel")]
fn export(endpoint: &str) -> weft::Result<Traces> {
    use weft::otel::OtelConfig;
    let mut config =
        OtelConfig::new(endpoint).record_content(std::env::var("WEFT_OTEL_CONTENT").is_ok_and(|v| v == "1"));
    if let Ok(project) = std::env::var("WEFT_OTEL_PROJECT") {
        config = config.project(project);
    }
    let guard = weft::otel::init_with(config).map_err(weft::Error::custom)?;
    println!("traces: exported to {endpoint}");
    Ok(Traces { _guard: guard })
}

#[cfg(not(feature = "otel"))]
fn export(endpoint: &str) -> weft::Result<Traces> {
    Err(weft::Error::msg(format!(
        "WEFT_OTEL_ENDPOINT is {endpoint}, but the examples were built without their `otel` feature: \
         run them with `--features otel`"
    )))
}

/// Ends an example: on an error, prints it as a readable chain (`error: what failed: why`) rather than
/// its `Debug` form, and exits with status 1.
pub fn report<E: std::error::Error + 'static>(result: Result<(), E>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", weft::trace::error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
