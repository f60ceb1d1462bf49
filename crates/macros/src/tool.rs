//! Expansion of `#[tool]`.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, ItemFn, Lit, LitStr, Pat, ReturnType, Type};

/// Options given in `#[tool(...)]`.
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    return_direct: bool,
    krate: syn::Path,
}

/// The path of `weft_runnable_core` as the calling crate sees it: itself, or through the `weft` facade
/// (`::weft::core`) when the crate depends on the facade and not on the core.
fn default_crate_path() -> syn::Path {
    crate::krate::default_path(
        "weft-runnable-core",
        syn::parse_quote!(::weft_runnable_core),
        syn::parse_quote!(::weft::core),
    )
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut options =
        Options { name: None, description: None, return_direct: false, krate: default_crate_path() };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("name") {
            options.name = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("description") {
            options.description = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("return_direct") {
            options.return_direct = true;
        } else if meta.path.is_ident("crate") {
            options.krate = meta.value()?.parse()?;
        } else {
            return Err(
                meta.error("unknown #[tool] option; expected name, description, return_direct or crate")
            );
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(options)
}

/// What a parameter of the function becomes.
enum Param {
    /// An argument the model fills (or an injected one).
    Field { ident: syn::Ident, ty: Box<Type>, docs: Vec<Attribute>, injection: Option<TokenStream> },
    /// The `&ToolContext` parameter.
    Context,
}

/// The text of the `#[doc]` attributes, one line each, with the conventional leading space removed.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').map(str::to_owned).unwrap_or(line))
        .collect();
    lines.join("\n").trim().to_owned()
}

fn is_tool_context(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "ToolContext"),
            _ => false,
        },
        _ => false,
    }
}

fn is_result(output: &ReturnType) -> bool {
    match output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Result"),
            _ => false,
        },
        ReturnType::Default => false,
    }
}

/// Parses `#[inject(...)]` into the expression building the `InjectedArg`.
fn parse_injection(attr: &Attribute, field: &str, krate: &syn::Path) -> syn::Result<TokenStream> {
    let mut injection = None;
    attr.parse_nested_meta(|meta| {
        let built = if meta.path.is_ident("tool_call_id") {
            quote!(#krate::InjectedArg::tool_call_id(#field))
        } else if meta.path.is_ident("state") {
            if meta.input.peek(syn::Token![=]) {
                let key: LitStr = meta.value()?.parse()?;
                quote!(#krate::InjectedArg::state_key(#field, #key))
            } else {
                quote!(#krate::InjectedArg::state(#field))
            }
        } else if meta.path.is_ident("value") {
            let name: LitStr = meta.value()?.parse()?;
            quote!(#krate::InjectedArg::value(#field, #name))
        } else {
            return Err(meta.error("expected tool_call_id, state, state = \"key\" or value = \"name\""));
        };
        injection = Some(built);
        Ok(())
    })?;
    injection
        .ok_or_else(|| syn::Error::new(attr.span(), "#[inject] needs a source, e.g. #[inject(tool_call_id)]"))
}

fn parse_params(func: &mut ItemFn, krate: &syn::Path) -> syn::Result<Vec<Param>> {
    let mut params = Vec::new();
    for input in &mut func.sig.inputs {
        let FnArg::Typed(pat_type) = input else {
            return Err(syn::Error::new(input.span(), "#[tool] goes on a free function, not a method"));
        };
        let Pat::Ident(pat) = &*pat_type.pat else {
            return Err(syn::Error::new(pat_type.pat.span(), "tool parameters must be plain names"));
        };
        let ident = pat.ident.clone();
        let attrs = std::mem::take(&mut pat_type.attrs);
        if is_tool_context(&pat_type.ty) {
            params.push(Param::Context);
            continue;
        }
        if let Type::Reference(_) = &*pat_type.ty {
            return Err(syn::Error::new(
                pat_type.ty.span(),
                "tool parameters must be owned types (String rather than &str), except &ToolContext",
            ));
        }
        let mut docs = Vec::new();
        let mut injection = None;
        for attr in attrs {
            if attr.path().is_ident("doc") {
                docs.push(attr);
            } else if attr.path().is_ident("inject") {
                let field = ident.to_string();
                let field = field.strip_prefix("r#").unwrap_or(&field).to_owned();
                injection = Some(parse_injection(&attr, &field, krate)?);
            } else {
                pat_type.attrs.push(attr);
            }
        }
        params.push(Param::Field { ident, ty: pat_type.ty.clone(), docs, injection });
    }
    Ok(params)
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(attr)?;
    let mut func: ItemFn = syn::parse2(item)?;
    if !func.sig.generics.params.is_empty() || func.sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(func.sig.generics.span(), "#[tool] functions cannot be generic"));
    }
    let krate = &options.krate;
    let params = parse_params(&mut func, krate)?;
    let fn_name = func.sig.ident.clone();
    let tool_name = options.name.clone().unwrap_or_else(|| {
        let name = fn_name.to_string();
        LitStr::new(name.strip_prefix("r#").unwrap_or(&name), fn_name.span())
    });
    let description = match &options.description {
        Some(d) => d.value(),
        None => doc_text(&func.attrs),
    };
    if description.is_empty() {
        return Err(syn::Error::new(
            fn_name.span(),
            "#[tool] needs a doc comment (it becomes the tool's description) or description = \"...\"",
        ));
    }
    let (doc_attrs, other_attrs): (Vec<Attribute>, Vec<Attribute>) =
        std::mem::take(&mut func.attrs).into_iter().partition(|a| a.path().is_ident("doc"));

    let krate_text = krate.to_token_stream().to_string().replace(' ', "");
    let serde_path = format!("{krate_text}::__private::serde");
    let schemars_path = format!("{krate_text}::__private::schemars");

    let mut fields = Vec::new();
    let mut field_idents = Vec::new();
    let mut call_args = Vec::new();
    let mut injected = Vec::new();
    for param in &params {
        match param {
            Param::Field { ident, ty, docs, injection } => {
                // An injected argument comes from the caller, never from the model: its type needs no
                // schema of its own (a state slice of messages has none), so it is described as any JSON.
                let any_json = injection.as_ref().map(|_| {
                    let value = format!("{krate_text}::__private::serde_json::Value");
                    quote!(#[schemars(with = #value)])
                });
                fields.push(quote!(#(#docs)* #any_json #ident: #ty));
                field_idents.push(ident.clone());
                call_args.push(quote!(#ident));
                injected.extend(injection.clone());
            }
            Param::Context => call_args.push(quote!(__weft_ctx)),
        }
    }
    let injected_fn = (!injected.is_empty()).then(|| {
        quote! {
            fn injected_args(&self) -> &[#krate::InjectedArg] {
                static INJECTED: ::std::sync::OnceLock<::std::vec::Vec<#krate::InjectedArg>> =
                    ::std::sync::OnceLock::new();
                INJECTED.get_or_init(|| ::std::vec![#(#injected),*])
            }
        }
    });

    let vis = &func.vis;
    let asyncness = &func.sig.asyncness;
    let await_call = asyncness.map(|_| quote!(.await));
    let inputs = &func.sig.inputs;
    let output = &func.sig.output;
    let block = &func.block;
    let return_direct = options.return_direct;
    let args_struct = format_ident!("__WeftToolArgs");
    let support = quote!(#krate::tools::macro_support);
    let convert = if is_result(&func.sig.output) {
        quote! {
            match __weft_out {
                ::std::result::Result::Ok(__weft_value) => {
                    use #support::{SerializeKind as _, ToolOutputKind as _};
                    (&&#support::Wrap(&__weft_value)).weft_output_kind().convert(__weft_value)
                }
                ::std::result::Result::Err(__weft_err) => {
                    use #support::{DisplayErrorKind as _, StdErrorKind as _, WeftErrorKind as _};
                    ::std::result::Result::Err(
                        (&&&#support::Wrap(&__weft_err)).weft_error_kind().convert(__weft_err),
                    )
                }
            }
        }
    } else {
        quote! {
            use #support::{SerializeKind as _, ToolOutputKind as _};
            (&&#support::Wrap(&__weft_out)).weft_output_kind().convert(__weft_out)
        }
    };

    Ok(quote! {
        #(#doc_attrs)*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #fn_name;

        impl #fn_name {
            #(#doc_attrs)*
            #(#other_attrs)*
            #vis #asyncness fn run(#inputs) #output #block
        }

        const _: () = {
            #[derive(#krate::__private::serde::Deserialize, #krate::__private::schemars::JsonSchema)]
            #[serde(crate = #serde_path)]
            #[schemars(crate = #schemars_path)]
            #[allow(non_camel_case_types, dead_code)]
            struct #args_struct {
                #(#fields,)*
            }

            #[#krate::__private::async_trait]
            impl #krate::Tool for #fn_name {
                fn name(&self) -> &str {
                    #tool_name
                }

                fn description(&self) -> &str {
                    #description
                }

                fn args_schema(&self) -> &#krate::__private::serde_json::Value {
                    static SCHEMA: ::std::sync::OnceLock<#krate::__private::serde_json::Value> =
                        ::std::sync::OnceLock::new();
                    SCHEMA.get_or_init(#support::args_schema::<#args_struct>)
                }

                fn return_direct(&self) -> bool {
                    #return_direct
                }

                #injected_fn

                async fn call(
                    &self,
                    __weft_args: #krate::__private::serde_json::Value,
                    __weft_ctx: &#krate::ToolContext,
                ) -> #krate::Result<#krate::ToolOutput> {
                    let #args_struct { #(#field_idents),* } =
                        #support::parse_args::<#args_struct>(#tool_name, __weft_args)?;
                    let __weft_out = #fn_name::run(#(#call_args),*) #await_call;
                    #convert
                }
            }

            #krate::impl_tool_runnable!(#fn_name);
        };
    })
}
