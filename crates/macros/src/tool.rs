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
            return Err(syn::Error::new(input.span(), "a #[tool] method's receiver must come first"));
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

/// What both expansions (a free function, a method) share: the tool's name and description, the
/// function's attributes split into docs and the rest, and the arguments struct's pieces.
struct Parts {
    tool_name: LitStr,
    description: String,
    doc_attrs: Vec<Attribute>,
    other_attrs: Vec<Attribute>,
    params: Vec<Param>,
    /// The arguments struct's fields, with their docs.
    fields: Vec<TokenStream>,
    field_idents: Vec<syn::Ident>,
    /// The `InjectedArg`s of injected parameters.
    injected: Vec<TokenStream>,
    /// Paths of the core's serde and schemars, for the derives.
    serde_path: String,
    schemars_path: String,
    krate: syn::Path,
}

impl Parts {
    fn new(options: &Options, func: &mut ItemFn) -> syn::Result<Self> {
        let krate = &options.krate;
        let params = parse_params(func, krate)?;
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
        let value_path = format!("{krate_text}::__private::serde_json::Value");
        let mut parts = Self {
            tool_name,
            description,
            doc_attrs,
            other_attrs,
            params: Vec::new(),
            fields: Vec::new(),
            field_idents: Vec::new(),
            injected: Vec::new(),
            serde_path: format!("{krate_text}::__private::serde"),
            schemars_path: format!("{krate_text}::__private::schemars"),
            krate: krate.clone(),
        };
        for param in &params {
            if let Param::Field { ident, ty, docs, injection } = param {
                // An injected argument comes from the caller, never from the model: its type needs no
                // schema of its own (a state slice of messages has none), so it is described as any JSON.
                let any_json = injection.as_ref().map(|_| quote!(#[schemars(with = #value_path)]));
                parts.fields.push(quote!(#(#docs)* #any_json #ident: #ty));
                parts.field_idents.push(ident.clone());
                parts.injected.extend(injection.clone());
            }
        }
        parts.params = params;
        Ok(parts)
    }

    /// The arguments the function is called with: the fields by name, the context as `ctx`.
    fn call_args(&self, ctx: &TokenStream) -> Vec<TokenStream> {
        self.params
            .iter()
            .map(|param| match param {
                Param::Field { ident, .. } => quote!(#ident),
                Param::Context => ctx.clone(),
            })
            .collect()
    }

    /// The arguments struct `name`, deriving its deserializer and JSON schema.
    fn args_struct(&self, name: &syn::Ident) -> TokenStream {
        let (krate, serde_path, schemars_path, fields) =
            (&self.krate, &self.serde_path, &self.schemars_path, &self.fields);
        quote! {
            #[derive(#krate::__private::serde::Deserialize, #krate::__private::schemars::JsonSchema)]
            #[serde(crate = #serde_path)]
            #[schemars(crate = #schemars_path)]
            #[allow(non_camel_case_types, dead_code)]
            struct #name {
                #(#fields,)*
            }
        }
    }
}

/// The code turning the function's output `__weft_out` into `Result<ToolOutput>`, by autoref dispatch.
fn convert_output(krate: &syn::Path, output: &ReturnType) -> TokenStream {
    let support = quote!(#krate::tools::macro_support);
    if is_result(output) {
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
    }
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(attr)?;
    let mut func: ItemFn = syn::parse2(item)?;
    if !func.sig.generics.params.is_empty() || func.sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(func.sig.generics.span(), "#[tool] functions cannot be generic"));
    }
    let receiver = match func.sig.inputs.first() {
        Some(FnArg::Receiver(receiver)) if receiver.reference.is_some() && receiver.mutability.is_none() => {
            Some(receiver.clone())
        }
        Some(FnArg::Receiver(receiver)) => {
            return Err(syn::Error::new(
                receiver.span(),
                "a #[tool] method takes `&self` (the tool holds a clone of the value and calls it)",
            ));
        }
        _ => None,
    };
    if receiver.is_some() {
        let inputs = std::mem::take(&mut func.sig.inputs);
        func.sig.inputs = inputs.into_iter().skip(1).collect();
    }
    let parts = Parts::new(&options, &mut func)?;
    match receiver {
        Some(receiver) => Ok(expand_method(&options, &parts, &func, receiver)),
        None => Ok(expand_fn(&options, &parts, &func)),
    }
}

/// The pieces of the function that both expansions write back.
struct Sig<'a> {
    vis: &'a syn::Visibility,
    asyncness: &'a Option<syn::Token![async]>,
    /// `.await` after the call when the function is async.
    await_call: Option<TokenStream>,
    inputs: &'a syn::punctuated::Punctuated<FnArg, syn::Token![,]>,
    output: &'a ReturnType,
    block: &'a syn::Block,
}

impl<'a> Sig<'a> {
    fn of(func: &'a ItemFn) -> Self {
        Self {
            vis: &func.vis,
            asyncness: &func.sig.asyncness,
            await_call: func.sig.asyncness.map(|_| quote!(.await)),
            inputs: &func.sig.inputs,
            output: &func.sig.output,
            block: &func.block,
        }
    }
}

/// `#[tool]` on a method taking `&self`: the method stays as it is, and a second method, `NAME_tool`,
/// returns a `StructuredTool` holding a clone of the value, so tools capture what they need (a database
/// handle, a folder) without statics.
fn expand_method(options: &Options, parts: &Parts, func: &ItemFn, receiver: syn::Receiver) -> TokenStream {
    let krate = &options.krate;
    let fn_name = &func.sig.ident;
    let tool_fn = format_ident!("{}_tool", fn_name.to_string().trim_start_matches("r#"));
    let Parts { tool_name, description, doc_attrs, other_attrs, field_idents, injected, .. } = parts;
    let Sig { vis, asyncness, await_call, inputs, output, block } = Sig::of(func);
    let return_direct = options.return_direct;
    let args_struct = format_ident!("__WeftToolArgs");
    let args_def = parts.args_struct(&args_struct);
    let call_args = parts.call_args(&quote!(&__weft_ctx));
    let convert = convert_output(krate, output);
    let tool_doc = format!(
        " The `{}` tool of this value (see [`Self::{fn_name}`]): a `StructuredTool` holding a clone of it.",
        tool_name.value()
    );
    let comma = (!inputs.is_empty()).then(|| quote!(,));
    quote! {
        #(#doc_attrs)*
        #(#other_attrs)*
        #vis #asyncness fn #fn_name(#receiver #comma #inputs) #output #block

        #[doc = #tool_doc]
        #vis fn #tool_fn(&self) -> #krate::StructuredTool
        where
            Self: ::std::clone::Clone + ::std::marker::Send + ::std::marker::Sync + 'static,
        {
            #args_def
            let __weft_this = ::std::clone::Clone::clone(self);
            let __weft_tool = #krate::StructuredTool::from_typed_with_context(
                #tool_name,
                #description,
                move |__weft_args: #args_struct, __weft_ctx: #krate::ToolContext| {
                    let __weft_this = ::std::clone::Clone::clone(&__weft_this);
                    async move {
                        let #args_struct { #(#field_idents),* } = __weft_args;
                        let __weft_out = __weft_this.#fn_name(#(#call_args),*) #await_call;
                        #convert
                    }
                },
            )
            .with_return_direct(#return_direct);
            [#(#injected),*].into_iter().fold(__weft_tool, #krate::StructuredTool::with_injected)
        }
    }
}

/// `#[tool]` on a free function: a unit struct of the function's name that is the tool, with the function
/// kept as its `run`.
fn expand_fn(options: &Options, parts: &Parts, func: &ItemFn) -> TokenStream {
    let krate = &options.krate;
    let fn_name = &func.sig.ident;
    let Parts { tool_name, description, doc_attrs, other_attrs, field_idents, injected, .. } = parts;
    let injected_fn = (!injected.is_empty()).then(|| {
        quote! {
            fn injected_args(&self) -> &[#krate::InjectedArg] {
                static INJECTED: ::std::sync::OnceLock<::std::vec::Vec<#krate::InjectedArg>> =
                    ::std::sync::OnceLock::new();
                INJECTED.get_or_init(|| ::std::vec![#(#injected),*])
            }
        }
    });
    let Sig { vis, asyncness, await_call, inputs, output, block } = Sig::of(func);
    let return_direct = options.return_direct;
    let args_struct = format_ident!("__WeftToolArgs");
    let args_def = parts.args_struct(&args_struct);
    let call_args = parts.call_args(&quote!(__weft_ctx));
    let support = quote!(#krate::tools::macro_support);
    let convert = convert_output(krate, output);

    quote! {
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
            #args_def

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

                fn args_validator(&self) -> #krate::ArgsValidator {
                    static VALIDATOR: ::std::sync::OnceLock<#krate::ArgsValidator> = ::std::sync::OnceLock::new();
                    ::std::clone::Clone::clone(
                        VALIDATOR.get_or_init(|| #krate::ArgsValidator::new(&#krate::Tool::model_schema(self))),
                    )
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
    }
}
