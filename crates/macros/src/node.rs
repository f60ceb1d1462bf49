//! Expansion of `#[node]`: an `async fn` written as a node reads (the state, the runtime by value or by
//! reference, any error), made into one the graph takes as it is.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, PatType, ReturnType, Type};

/// Options given in `#[node(...)]`.
struct Options {
    /// The graph's state type, for the `NAME_node` method when the first parameter is another input type.
    state: Option<Type>,
    krate: syn::Path,
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut options = Options {
        state: None,
        krate: crate::krate::default_path(
            "weft-graph",
            syn::parse_quote!(::weft_graph),
            syn::parse_quote!(::weft::graph),
        ),
    };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("state") {
            options.state = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("crate") {
            options.krate = meta.value()?.parse()?;
        } else {
            return Err(meta.error("unknown #[node] option; expected state or crate"));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(options)
}

/// The node's parameters: its input (the state) and, optionally, the runtime.
struct Params {
    input: PatType,
    /// The runtime parameter and whether it is taken by reference.
    runtime: Option<(PatType, bool)>,
}

fn is_runtime(ty: &Type) -> Option<bool> {
    let (ty, by_ref) = match ty {
        Type::Reference(r) if r.mutability.is_none() => (&*r.elem, true),
        other => (other, false),
    };
    match ty {
        Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Runtime") => Some(by_ref),
        _ => None,
    }
}

fn parse_params<'a>(inputs: impl Iterator<Item = &'a FnArg>) -> syn::Result<Params> {
    let typed: Vec<&PatType> = inputs
        .map(|input| match input {
            FnArg::Typed(typed) if matches!(&*typed.pat, Pat::Ident(_)) => Ok(typed),
            other => Err(syn::Error::new(
                other.span(),
                "#[node] parameters are plain names: (state) or (state, runtime)",
            )),
        })
        .collect::<syn::Result<_>>()?;
    match typed.as_slice() {
        [input] => Ok(Params { input: (*input).clone(), runtime: None }),
        [input, runtime] => match is_runtime(&runtime.ty) {
            Some(by_ref) => {
                Ok(Params { input: (*input).clone(), runtime: Some(((*runtime).clone(), by_ref)) })
            }
            None => Err(syn::Error::new(
                runtime.ty.span(),
                "a node's second parameter is its `Runtime` (or `&Runtime`)",
            )),
        },
        _ => Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "a #[node] takes its state (or another input) and, optionally, its `Runtime`",
        )),
    }
}

/// `Ok` of `Result<T, E>`, when the function returns a `Result`.
fn result_ok_type(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else { return None };
    let Type::Path(path) = &**ty else { return None };
    let last = path.path.segments.last().filter(|s| s.ident == "Result")?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(args) => args.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::Type(ty) => Some(ty),
            _ => None,
        }),
        _ => None,
    }
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(attr)?;
    let func: ItemFn = syn::parse2(item)?;
    if func.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            func.sig.fn_token.span(),
            "#[node] goes on an `async fn` (a plain `fn` is a node as it is)",
        ));
    }
    if !func.sig.generics.params.is_empty() || func.sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(func.sig.generics.span(), "#[node] functions cannot be generic"));
    }
    match func.sig.inputs.first() {
        Some(FnArg::Receiver(receiver)) if receiver.reference.is_some() && receiver.mutability.is_none() => {
            expand_method(&options, &func)
        }
        Some(FnArg::Receiver(receiver)) => Err(syn::Error::new(
            receiver.span(),
            "a #[node] method takes `&self` (the node holds a clone of the value)",
        )),
        _ => expand_fn(&options, &func),
    }
}

/// The code turning `__weft_out` (the function's output) into what the graph takes: an `Err` of any
/// error becomes weft's `Error` (weft's own as is, a `std::error::Error` kept whole, anything `Display`
/// as its message); any other output is left as it is.
fn convert(krate: &syn::Path, output: &ReturnType) -> TokenStream {
    if result_ok_type(output).is_none() {
        return quote!(__weft_out);
    }
    let support = quote!(#krate::__private::core::tools::macro_support);
    quote! {
        match __weft_out {
            ::std::result::Result::Ok(__weft_value) => ::std::result::Result::Ok(__weft_value),
            ::std::result::Result::Err(__weft_err) => {
                use #support::{DisplayErrorKind as _, StdErrorKind as _, WeftErrorKind as _};
                ::std::result::Result::Err((&&&#support::Wrap(&__weft_err)).weft_error_kind().convert(__weft_err))
            }
        }
    }
}

/// What the converted function returns: `weft::Result<T>` for a `Result<T, E>`, else the output itself.
fn node_output(krate: &syn::Path, output: &ReturnType) -> TokenStream {
    match result_ok_type(output) {
        Some(ok) => quote!(-> #krate::__private::core::Result<#ok>),
        None => quote!(#output),
    }
}

/// `#[node]` on a free `async fn`: the same function, taking the runtime by value (as the graph passes
/// it) and returning weft's `Result`, with the written one inside.
fn expand_fn(options: &Options, func: &ItemFn) -> syn::Result<TokenStream> {
    let krate = &options.krate;
    let params = parse_params(func.sig.inputs.iter())?;
    let (attrs, vis, name, inputs, output, block) =
        (&func.attrs, &func.vis, &func.sig.ident, &func.sig.inputs, &func.sig.output, &func.block);
    let input_ty = &params.input.ty;
    let (outer_runtime, runtime_arg) = match &params.runtime {
        Some((_, by_ref)) => {
            let arg = if *by_ref { quote!(&__weft_runtime) } else { quote!(__weft_runtime) };
            (quote!(, __weft_runtime: #krate::Runtime), quote!(, #arg))
        }
        None => (quote!(), quote!()),
    };
    let node_output = node_output(krate, output);
    let convert = convert(krate, output);
    Ok(quote! {
        #(#attrs)*
        #vis async fn #name(__weft_input: #input_ty #outer_runtime) #node_output {
            async fn __weft_node(#inputs) #output #block
            let __weft_out = __weft_node(__weft_input #runtime_arg).await;
            #convert
        }
    })
}

/// `#[node]` on a method taking `&self`: the method stays, and `NAME_node(&self)` returns a
/// [`BoxNode`](weft_graph::BoxNode) holding a clone of the value, so a node captures its model or client
/// without a closure that clones it into an `async move` block.
fn expand_method(options: &Options, func: &ItemFn) -> syn::Result<TokenStream> {
    let krate = &options.krate;
    let params = parse_params(func.sig.inputs.iter().skip(1))?;
    let name = &func.sig.ident;
    let node_fn = format_ident!("{}_node", name.to_string().trim_start_matches("r#"));
    let input_ty = &params.input.ty;
    let state = options.state.as_ref().unwrap_or(input_ty);
    let runtime_arg = match &params.runtime {
        Some((_, true)) => quote!(, &__weft_runtime),
        Some((_, false)) => quote!(, __weft_runtime),
        None => quote!(),
    };
    let node_output = match result_ok_type(&func.sig.output) {
        Some(ok) => quote!(#krate::__private::core::Result<#ok>),
        None => match &func.sig.output {
            ReturnType::Type(_, ty) => quote!(#ty),
            ReturnType::Default => quote!(()),
        },
    };
    let convert = convert(krate, &func.sig.output);
    let vis = &func.vis;
    let doc = format!(" The node of this value that runs [`Self::{name}`], holding a clone of the value.");
    Ok(quote! {
        #func

        #[doc = #doc]
        #vis fn #node_fn(&self) -> #krate::BoxNode<#state>
        where
            Self: ::std::clone::Clone + ::std::marker::Send + ::std::marker::Sync + 'static,
        {
            let __weft_this = ::std::clone::Clone::clone(self);
            #krate::IntoNode::into_node(move |__weft_input: #input_ty, __weft_runtime: #krate::Runtime| {
                let __weft_this = ::std::clone::Clone::clone(&__weft_this);
                async move {
                    let __weft_out = __weft_this.#name(__weft_input #runtime_arg).await;
                    let __weft_node_out: #node_output = #convert;
                    __weft_node_out
                }
            })
        }
    })
}
