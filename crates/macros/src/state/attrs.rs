//! Reading `#[state(...)]` attributes.

use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{Attribute, Field, GenericArgument, Ident, Path, PathArguments, Type};

/// How a field's channel folds its writes.
pub(crate) enum Kind {
    /// One value per step.
    LastValue,
    /// A user reducer `fn(&mut T, T) -> R`.
    Reducer(Path),
    /// `Vec` extension.
    Append,
    /// LangGraph's message merge.
    AddMessages,
    /// `Option<U>` cleared after a step without a write; the inner type.
    Ephemeral(Type),
    /// A list of everything written.
    Topic { accumulate: bool },
    /// One value per step, never checkpointed.
    Untracked,
}

impl Kind {
    /// Whether the channel folds writes with a reducer (and so takes overwrites).
    pub(crate) fn is_reducer(&self) -> bool {
        matches!(self, Kind::Reducer(_) | Kind::Append | Kind::AddMessages)
    }

    /// Whether two writes in one step are an error.
    pub(crate) fn is_single_value(&self) -> bool {
        matches!(self, Kind::LastValue | Kind::Ephemeral(_) | Kind::Untracked)
    }
}

/// A field of the state struct.
pub(crate) struct StateField {
    /// The field's identifier.
    pub(crate) ident: Ident,
    /// The channel name (the field name without `r#`).
    pub(crate) name: String,
    /// The field's type.
    pub(crate) ty: Type,
    /// The channel kind.
    pub(crate) kind: Kind,
    /// The field's doc attributes.
    pub(crate) docs: Vec<Attribute>,
}

const EXPECTED: &str = "expected one of `reducer = path`, `append`, `add_messages`, `ephemeral`, `topic`, \
                        `topic(accumulate)` or `untracked`";

impl StateField {
    /// Reads a named field and its `#[state(...)]` attributes.
    pub(crate) fn parse(field: &Field) -> syn::Result<Self> {
        let Some(ident) = field.ident.clone() else {
            return Err(syn::Error::new(field.span(), "derive(State) needs named fields"));
        };
        let mut kind: Option<(Kind, proc_macro2::Span)> = None;
        for attr in field.attrs.iter().filter(|a| a.path().is_ident("state")) {
            attr.parse_nested_meta(|meta| {
                let span = meta.path.span();
                let parsed = if meta.path.is_ident("reducer") {
                    Kind::Reducer(meta.value()?.parse::<Path>()?)
                } else if meta.path.is_ident("append") {
                    Kind::Append
                } else if meta.path.is_ident("add_messages") {
                    if !last_segment_is(&field.ty, "Messages") {
                        return Err(syn::Error::new_spanned(
                            &field.ty,
                            "`#[state(add_messages)]` needs a field of type `Messages` (weft_graph's shared message \
                             list; writes to it are `Vec<Message>`)",
                        ));
                    }
                    Kind::AddMessages
                } else if meta.path.is_ident("ephemeral") {
                    Kind::Ephemeral(option_inner(&field.ty).ok_or_else(|| {
                        syn::Error::new(
                            field.ty.span(),
                            "`#[state(ephemeral)]` needs a field of type `Option<T>`",
                        )
                    })?)
                } else if meta.path.is_ident("topic") {
                    let mut accumulate = false;
                    if meta.input.peek(syn::token::Paren) {
                        meta.parse_nested_meta(|inner| {
                            if inner.path.is_ident("accumulate") {
                                accumulate = true;
                                Ok(())
                            } else {
                                Err(inner.error("unknown topic option; expected `accumulate`"))
                            }
                        })?;
                    }
                    Kind::Topic { accumulate }
                } else if meta.path.is_ident("untracked") {
                    Kind::Untracked
                } else if meta.path.is_ident("crate") {
                    return Err(meta.error("`crate = ...` goes on the struct, not on a field"));
                } else {
                    let name = meta.path.get_ident().map_or_else(|| "?".to_owned(), ToString::to_string);
                    return Err(meta.error(format!("unknown state attribute `{name}`; {EXPECTED}")));
                };
                if kind.is_some() {
                    return Err(syn::Error::new(span, "a field takes one channel kind; this one has two"));
                }
                kind = Some((parsed, span));
                Ok(())
            })?;
        }
        Ok(Self {
            name: ident.unraw().to_string(),
            ident,
            ty: field.ty.clone(),
            kind: kind.map_or(Kind::LastValue, |(k, _)| k),
            docs: field.attrs.iter().filter(|a| a.path().is_ident("doc")).cloned().collect(),
        })
    }
}

/// Reads the struct's `#[state(crate = path)]`.
pub(crate) fn crate_path(attrs: &[Attribute]) -> syn::Result<Path> {
    let mut krate: Path = crate::krate::default_path(
        "weft-graph",
        syn::parse_quote!(::weft_graph),
        syn::parse_quote!(::weft::graph),
    );
    for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                krate = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown state attribute on the struct; expected `crate = path`"))
            }
        })?;
    }
    Ok(krate)
}

/// Whether the last segment of the path type `ty` is `name`.
fn last_segment_is(ty: &Type, name: &str) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == name))
}

/// `U` when `ty` is written `Option<U>` (or `std::option::Option<U>`).
fn option_inner(ty: &Type) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.first() {
        Some(GenericArgument::Type(inner)) if args.args.len() == 1 => Some(inner.clone()),
        _ => None,
    }
}

/// Whether `ty` is a primitive number: its setter takes it by value, not `impl Into`, so that an integer
/// literal infers (`impl Into<u8>` would see an `i32`). Everything else, `bool` and `Option`s of numbers
/// included, takes `impl Into<T>` (`Option<u64>` accepts `5`, `None` and `Some(5)`).
pub(crate) fn is_number(ty: &Type) -> bool {
    const NUMBERS: &[&str] = &[
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32", "f64",
    ];
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            p.path.get_ident().is_some_and(|i| NUMBERS.iter().any(|n| i == n))
        }
        _ => false,
    }
}
