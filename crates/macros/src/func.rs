//! `#[task]` and `#[entrypoint]`: LangGraph's functional-API decorators, over `weft_graph::func::task`
//! and `weft_graph::func::entrypoint`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{
    Attribute, Expr, FnArg, GenericArgument, ItemFn, LitStr, Pat, Path, PathArguments, ReturnType, Type,
    Visibility,
};

/// What both attributes accept: `name = ".."` and `crate = path`; `retry = expr` (repeatable) for tasks.
struct Options {
    name: Option<LitStr>,
    krate: Path,
    retry: Vec<Expr>,
}

fn options(attr: TokenStream, allow_retry: bool, what: &str) -> syn::Result<Options> {
    let mut options = Options {
        name: None,
        krate: crate::krate::default_path(
            "weft-graph",
            syn::parse_quote!(::weft_graph),
            syn::parse_quote!(::weft::graph),
        ),
        retry: Vec::new(),
    };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            let name: LitStr = meta.value()?.parse()?;
            if name.value().is_empty() {
                return Err(syn::Error::new_spanned(name, format!("{what} name cannot be empty")));
            }
            options.name = Some(name);
            Ok(())
        } else if meta.path.is_ident("crate") {
            options.krate = meta.value()?.parse()?;
            Ok(())
        } else if allow_retry && meta.path.is_ident("retry") {
            options.retry.push(meta.value()?.parse()?);
            Ok(())
        } else if allow_retry {
            Err(meta.error(
                "unknown task attribute; expected `name = \"..\"`, `retry = policy` or `crate = path`",
            ))
        } else {
            Err(meta.error("unknown entrypoint attribute; expected `name = \"..\"` or `crate = path`"))
        }
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(options)
}

/// The parts of the function both attributes need, checked: async, no generics, no receiver, a return
/// type.
struct Signature<'a> {
    attrs: &'a [Attribute],
    vis: &'a Visibility,
    ident: &'a syn::Ident,
    params: Vec<(&'a Pat, &'a Type)>,
    output: &'a Type,
}

fn signature<'a>(item: &'a ItemFn, what: &str) -> syn::Result<Signature<'a>> {
    let sig = &item.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(sig.fn_token, format!("{what} must be an `async fn`")));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(&sig.generics, format!("{what} cannot be generic")));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(variadic, format!("{what} cannot be variadic")));
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new_spanned(receiver, format!("{what} cannot take `self`")));
            }
            FnArg::Typed(typed) => params.push((&*typed.pat, &*typed.ty)),
        }
    }
    let ReturnType::Type(_, output) = &sig.output else {
        return Err(syn::Error::new_spanned(
            &sig.ident,
            format!("{what} returns weft's `Result<T>`; it has no return type"),
        ));
    };
    Ok(Signature { attrs: &item.attrs, vis: &item.vis, ident: &sig.ident, params, output })
}

/// `T` of a return type `Result<T>` or `Result<T, E>` (any path ending in `Result`).
fn ok_type<'a>(output: &'a Type, what: &str) -> syn::Result<&'a Type> {
    let err = || syn::Error::new_spanned(output, format!("{what} returns weft's `Result<T>`"));
    let Type::Path(path) = output else { return Err(err()) };
    let last = path.path.segments.last().ok_or_else(err)?;
    if last.ident != "Result" {
        return Err(err());
    }
    match &last.arguments {
        PathArguments::AngleBracketed(args) => match args.args.first() {
            Some(GenericArgument::Type(ty)) => Ok(ty),
            _ => Err(err()),
        },
        _ => Err(err()),
    }
}

/// The generic arguments of `ty` when its last path segment is `ident`: `Option<P>` gives `[P]`.
fn type_args<'a>(ty: &'a Type, ident: &str) -> Option<Vec<&'a Type>> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != ident {
        return None;
    }
    match &last.arguments {
        PathArguments::AngleBracketed(args) => Some(
            args.args
                .iter()
                .filter_map(|a| match a {
                    GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect(),
        ),
        PathArguments::None => Some(Vec::new()),
        PathArguments::Parenthesized(_) => None,
    }
}

/// `#[task]`: the function becomes a plain function of the same parameters returning the call's
/// `TaskFuture`, backed by one `Task` made on first use.
pub(crate) fn expand_task(attr: TokenStream, item: ItemFn) -> syn::Result<TokenStream> {
    let options = options(attr, true, "a task")?;
    let sig = signature(&item, "a #[task] function")?;
    let ok = ok_type(sig.output, "a #[task] function")?;
    let Options { name, krate, retry } = options;
    let (attrs, vis, ident, output) = (sig.attrs, sig.vis, sig.ident, sig.output);
    let name = name.map_or_else(|| ident.to_string(), |n| n.value());
    let params: Vec<_> = sig.params.iter().map(|(pat, ty)| quote!(#pat: #ty)).collect();
    let types: Vec<&Type> = sig.params.iter().map(|(_, ty)| *ty).collect();
    let args: Vec<_> = (0..types.len()).map(|i| format_ident!("__weft_arg{i}")).collect();
    let (input_type, input_pat, input_value) = match types.as_slice() {
        [one] => (quote!(#one), quote!(#(#args)*), quote!(#(#args)*)),
        _ => (quote!((#(#types,)*)), quote!((#(#args,)*)), quote!((#(#args,)*))),
    };
    let block = &item.block;
    let doc = format!(
        "A task named `{name}` (`#[task]`): called inside an entrypoint, it returns a future of its result, \
         which the run saves."
    );
    Ok(quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #doc]
        #vis fn #ident(#(#args: #types),*) -> #krate::func::TaskFuture<#ok> {
            async fn __weft_task_body(#(#params),*) -> #output #block
            static __WEFT_TASK: ::std::sync::OnceLock<#krate::func::Task<#input_type, #ok>> =
                ::std::sync::OnceLock::new();
            __WEFT_TASK
                .get_or_init(|| {
                    #krate::func::task(#name, |#input_pat: #input_type| __weft_task_body(#(#args),*))
                        #(.with_retry(#retry))*
                })
                .call(#input_value)
        }
    })
}

/// `#[entrypoint]`: the function becomes a function of no parameters returning the entrypoint's
/// `StateGraph`, to compile.
pub(crate) fn expand_entrypoint(attr: TokenStream, item: ItemFn) -> syn::Result<TokenStream> {
    let options = options(attr, false, "an entrypoint")?;
    let sig = signature(&item, "an #[entrypoint] function")?;
    let returned = ok_type(sig.output, "an #[entrypoint] function")?;
    let Options { name, krate, .. } = options;
    let (attrs, vis, ident, output) = (sig.attrs, sig.vis, sig.ident, sig.output);
    let name = name.map_or_else(|| ident.to_string(), |n| n.value());
    let usage = "an #[entrypoint] function takes its input, then optionally `previous: Option<P>` and a \
                 `Runtime`, in that order";
    let Some(((_, input), rest)) = sig.params.split_first() else {
        return Err(syn::Error::new_spanned(ident, usage));
    };
    let mut previous = None;
    let mut runtime = None;
    for (pat, ty) in rest {
        let runtime_param = type_args(ty, "Runtime").is_some_and(|a| a.is_empty());
        match type_args(ty, "Option") {
            Some(args) if args.len() == 1 && previous.is_none() && runtime.is_none() => {
                previous = Some(args[0])
            }
            _ if runtime_param && runtime.is_none() => runtime = Some(*ty),
            _ => return Err(syn::Error::new_spanned(pat, usage)),
        }
    }
    // The returned and saved types: `Final<O, P>`, or one type for both.
    let (value, saved) = match type_args(returned, "Final") {
        Some(args) if args.len() == 2 => (args[0], args[1]),
        _ => (returned, previous.unwrap_or(returned)),
    };
    let params: Vec<_> = sig.params.iter().map(|(pat, ty)| quote!(#pat: #ty)).collect();
    let mut call = vec![quote!(__weft_input)];
    if previous.is_some() {
        call.push(quote!(__weft_previous));
    }
    if runtime.is_some() {
        call.push(quote!(__weft_runtime));
    }
    let block = &item.block;
    let doc = format!("The entrypoint `{name}` (`#[entrypoint]`) as a graph of one node, to compile.");
    Ok(quote! {
        #(#attrs)*
        #[doc = ""]
        #[doc = #doc]
        #vis fn #ident() -> #krate::StateGraph<#krate::func::FuncState<#input, #value, #saved>> {
            async fn __weft_entrypoint_body(#(#params),*) -> #output #block
            #krate::func::entrypoint(
                #name,
                |__weft_input: #input,
                 __weft_previous: ::std::option::Option<#saved>,
                 __weft_runtime: #krate::Runtime| {
                    let _ = (&__weft_previous, &__weft_runtime);
                    __weft_entrypoint_body(#(#call),*)
                },
            )
        }
    })
}
