//! The generated `State` implementation.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned as _;

use super::Input;
use super::attrs::{Kind, StateField};

pub(super) fn generate(input: &Input) -> TokenStream {
    let Input { ident, update, krate, fields, .. } = input;
    let s = quote!(#krate::state::derive_support);
    let result = quote!(::core::result::Result);

    let written = fields.iter().enumerate().map(|(index, f)| {
        let name = &f.ident;
        quote!(if update.#name.is_some() { out.insert(#index); })
    });

    let prepare = fields.iter().filter(|f| matches!(f.kind, Kind::AddMessages)).map(|f| {
        let name = &f.ident;
        quote! {
            if let ::core::option::Option::Some(messages) = &mut update.#name {
                #krate::messages::Messages::assign_ids(messages);
            }
        }
    });

    let apply_logged = apply_logged(input, &s);
    let clears = clears(input);
    let json = json_methods(input, &s);

    quote! {
        impl #krate::State for #ident {
            type Update = #update;

            fn channels(&self) -> ::std::borrow::Cow<'_, [#krate::ChannelSpec]> {
                ::std::borrow::Cow::Borrowed(<#update as #s::DerivedUpdate>::channel_specs())
            }

            fn written(&self, update: &#update, out: &mut #krate::ChannelSet) {
                #(#written)*
            }

            fn prepare_update(&self, update: &mut #update) {
                let _ = update;
                #(#prepare)*
            }

            fn apply(&mut self, updates: ::std::vec::Vec<#update>) -> #result<#krate::ChannelSet, #krate::UpdateError> {
                self.apply_logged(updates, &mut #krate::state::AppendLog::new())
            }

            #apply_logged

            fn end_step(&mut self, written: &#krate::ChannelSet) -> #krate::ChannelSet {
                let _ = written;
                let mut changed = #krate::ChannelSet::new();
                #(#clears)*
                changed
            }

            #json

            fn update_to_json(&self, update: &#update) -> #result<::std::vec::Vec<(usize, #s::Value)>, #krate::UpdateError> {
                #s::DerivedUpdate::to_json_writes(update)
            }

            fn update_from_json(
                &self,
                writes: ::std::vec::Vec<(usize, #s::Value)>,
            ) -> #result<#update, #krate::UpdateError> {
                <#update as #s::DerivedUpdate>::from_json_writes(writes)
            }
        }
    }
}

/// `State::apply_logged`: two passes over the step's updates, counting conflicting writes, then folding.
fn apply_logged(input: &Input, s: &TokenStream) -> TokenStream {
    let Input { update, krate, fields, .. } = input;
    let result = quote!(::core::result::Result);
    // Pass 1: count writes of single-value channels and overwrites of reducer channels.
    let counters = fields.iter().enumerate().filter_map(|(index, f)| {
        let name = &f.ident;
        let var = format_ident!("__count_{}", index);
        if f.kind.is_single_value() {
            Some(quote!(let mut #var = 0usize; for update in &updates { if update.#name.is_some() { #var += 1; } }))
        } else if f.kind.is_reducer() {
            Some(quote! {
                let mut #var = 0usize;
                for update in &updates {
                    if update.#name.is_some() && update.__overwrite.contains(#index) { #var += 1; }
                }
            })
        } else {
            None
        }
    });
    let checks = fields.iter().enumerate().filter_map(|(index, f)| {
        let key = &f.name;
        let var = format_ident!("__count_{}", index);
        if f.kind.is_single_value() {
            Some(quote!(if #var > 1 { return #result::Err(#s::concurrent_update(#key)); }))
        } else if f.kind.is_reducer() {
            Some(quote!(if #var > 1 { return #result::Err(#s::concurrent_overwrite(#key)); }))
        } else {
            None
        }
    });

    // Pass 2: fold the writes, update by update.
    let step_flags = fields.iter().enumerate().filter_map(|(index, f)| {
        let var = format_ident!("__flag_{}", index);
        (f.kind.is_reducer() || matches!(f.kind, Kind::Topic { accumulate: false }))
            .then(|| quote!(let mut #var = false;))
    });
    let bindings = fields.iter().enumerate().map(|(index, f)| {
        let name = &f.ident;
        let var = format_ident!("__write_{}", index);
        quote!(#name: #var,)
    });
    let folds = fields.iter().enumerate().map(|(index, f)| fold(f, index, krate, s));
    quote! {
        fn apply_logged(
            &mut self,
            updates: ::std::vec::Vec<#update>,
            log: &mut #krate::state::AppendLog,
        ) -> #result<#krate::ChannelSet, #krate::UpdateError> {
            let _ = &log;
            #(#counters)*
            #(#checks)*
            let mut changed = #krate::ChannelSet::new();
            #(#step_flags)*
            for update in updates {
                let #update { #(#bindings)* __overwrite: overwrite } = update;
                let _ = &overwrite;
                #(#folds)*
            }
            #result::Ok(changed)
        }
    }
}

/// How one update's write of field `f` (at `index`) folds into the state.
fn fold(f: &StateField, index: usize, krate: &syn::Path, s: &TokenStream) -> TokenStream {
    let name = &f.ident;
    let key = &f.name;
    let value = format_ident!("__write_{}", index);
    let flag = format_ident!("__flag_{}", index);
    let span = f.ty.span();
    let body = match &f.kind {
        Kind::LastValue | Kind::Untracked => quote!(self.#name = value; changed.insert(#index);),
        Kind::Ephemeral(_) => {
            quote!(self.#name = ::core::option::Option::Some(value); changed.insert(#index);)
        }
        Kind::Reducer(_) | Kind::Append | Kind::AddMessages => {
            let (replace, fold) = match &f.kind {
                Kind::Reducer(path) => {
                    (quote!(value), quote_spanned!(span=> #s::reduced(#key, #path(&mut self.#name, value))?;))
                }
                Kind::Append => (
                    quote!(value),
                    quote_spanned!(span=> #s::append_logged(&mut self.#name, value, log, #index);),
                ),
                _ => (
                    quote!({
                        let mut value = value;
                        #krate::messages::Messages::assign_ids(&mut value);
                        #krate::messages::Messages::from(value)
                    }),
                    quote_spanned!(span=> #s::add_messages_logged(#key, &mut self.#name, value, log, #index)?;),
                ),
            };
            quote! {
                if overwrite.contains(#index) {
                    self.#name = #replace;
                    log.replaced(#index);
                    #flag = true;
                    changed.insert(#index);
                } else if !#flag {
                    #fold
                    changed.insert(#index);
                }
            }
        }
        Kind::Topic { accumulate } => {
            let clear = if *accumulate {
                quote!()
            } else {
                quote! {
                    if !#flag {
                        #flag = true;
                        if !self.#name.is_empty() {
                            self.#name.clear();
                            changed.insert(#index);
                        }
                    }
                }
            };
            quote! {
                #clear
                if !value.is_empty() {
                    self.#name.extend(value);
                    changed.insert(#index);
                }
            }
        }
    };
    quote!(if let ::core::option::Option::Some(value) = #value { #body })
}

/// The statements of `State::end_step` clearing ephemeral values and non-accumulating topics not written.
fn clears(input: &Input) -> impl Iterator<Item = TokenStream> + '_ {
    input.fields.iter().enumerate().filter_map(|(index, f)| {
        let name = &f.ident;
        match f.kind {
            Kind::Ephemeral(_) => Some(quote! {
                if !written.contains(#index) && self.#name.is_some() {
                    self.#name = ::core::option::Option::None;
                    changed.insert(#index);
                }
            }),
            Kind::Topic { accumulate: false } => Some(quote! {
                if !written.contains(#index) && !self.#name.is_empty() {
                    self.#name.clear();
                    changed.insert(#index);
                }
            }),
            _ => None,
        }
    })
}

/// The channels' JSON methods: `channel_to_json`, `channel_tail_to_json`, `channel_from_json` and
/// `channel_index`.
fn json_methods(input: &Input, s: &TokenStream) -> TokenStream {
    let Input { krate, fields, .. } = input;
    let result = quote!(::core::result::Result);
    let to_json = fields.iter().enumerate().map(|(index, f)| {
        let name = &f.ident;
        let key = &f.name;
        match f.kind {
            Kind::Untracked => quote!(#index => #result::Ok(::core::option::Option::None),),
            Kind::Topic { .. } => quote! {
                #index => if self.#name.is_empty() {
                    #result::Ok(::core::option::Option::None)
                } else {
                    #s::channel_json(#key, &self.#name)
                },
            },
            _ => quote!(#index => #s::channel_json(#key, &self.#name),),
        }
    });

    let tails = fields.iter().enumerate().filter_map(|(index, f)| {
        let name = &f.ident;
        let key = &f.name;
        let span = f.ty.span();
        matches!(f.kind, Kind::Append | Kind::AddMessages)
            .then(|| quote_spanned!(span=> #index => #s::tail_json(#key, &self.#name, count),))
    });

    let from_json = fields.iter().enumerate().map(|(index, f)| {
        let name = &f.ident;
        let key = &f.name;
        let ty = &f.ty;
        let span = ty.span();
        let empty = if matches!(f.kind, Kind::Untracked) {
            // Never checkpointed: an absent value keeps whatever the state holds when it has no default.
            quote! {
                if let ::core::option::Option::Some(empty) = (&#s::EmptyProbe::<#ty>::new()).empty() {
                    self.#name = empty;
                } else if let #result::Ok(value) = #s::from_json::<#ty>(#key, value) {
                    self.#name = value;
                }
            }
        } else {
            quote_spanned! {span=>
                self.#name = match (&#s::EmptyProbe::<#ty>::new()).empty() {
                    ::core::option::Option::Some(empty) => empty,
                    ::core::option::Option::None => #s::from_json::<#ty>(#key, value)?,
                };
            }
        };
        quote! {
            #index => {
                if value.is_null() {
                    #empty
                } else {
                    self.#name = #s::from_json(#key, value)?;
                }
                #result::Ok(())
            }
        }
    });

    let index_of = fields.iter().enumerate().map(|(index, f)| {
        let key = &f.name;
        quote!(#key => ::core::option::Option::Some(#index),)
    });

    quote! {
        fn channel_to_json(&self, index: usize) -> #result<::core::option::Option<#s::Value>, #krate::UpdateError> {
            match index {
                #(#to_json)*
                _ => #result::Err(#s::unknown_index(index)),
            }
        }

        fn channel_tail_to_json(
            &self,
            index: usize,
            count: usize,
        ) -> #result<::core::option::Option<#s::Value>, #krate::UpdateError> {
            let _ = count;
            match index {
                #(#tails)*
                _ => #result::Ok(::core::option::Option::None),
            }
        }

        fn channel_from_json(&mut self, index: usize, value: #s::Value) -> #result<(), #krate::UpdateError> {
            #[allow(unused_imports)]
            use #s::{EmptyViaDefault as _, EmptyViaNothing as _};
            match index {
                #(#from_json)*
                _ => #result::Err(#s::unknown_index(index)),
            }
        }

        fn channel_index(&self, name: &str) -> ::core::option::Option<usize> {
            match name {
                #(#index_of)*
                _ => ::core::option::Option::None,
            }
        }
    }
}
