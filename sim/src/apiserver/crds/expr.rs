//! The CEL of Kubernetes, as far as the sim evaluates it: one environment (the standard library
//! and macros, the strings, lists and math extensions, `cel.bind`, cel-go's sets and what is
//! cheap of the Kubernetes libraries), compilation with the reference checks kube-apiserver
//! makes, evaluation, JSON values as CEL values, and cel-go's wording of evaluation errors.
//!
//! Two users: CRD validation rules ([`super::schema`], whose variables are `self` and
//! `oldSelf`) and ValidatingAdmissionPolicies ([`super::vap`], whose variables are `object`,
//! `oldObject`, `request`, `params`, `namespaceObject`, `authorizer` and `variables`). What
//! each may reference is the caller's to say ([`references`]); the language is the same.

use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map as CelMap};
use cel::parser::{Macro, ParseError};
use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use regex::Regex;
use serde_json::Value;
use telemesh_core::go::float as go_float;

/// Compiles `src` (a parse error is cel-go's message, e.g. `ERROR: <input>:1:3: ...`).
pub fn compile(env: &Env, src: &str) -> Result<Program, String> {
    match catch_unwind(AssertUnwindSafe(|| env.compile(src))) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("ERROR: <input>: internal parser error".to_string()),
    }
}

/// Identifiers every expression may reference besides its variables and comprehension variables.
const TYPE_IDENTS: [&str; 11] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// Namespaces of qualified function names (`math.greatest`, `sets.contains`, ...).
const NAMESPACES: [&str; 9] = [
    "math", "strings", "sets", "lists", "optional", "cel", "format", "ip", "base64",
];

/// Kubernetes CEL functions not implemented here: CRD rules calling them are skipped, policies
/// calling them fail as misconfigured.
const K8S_MISSING: [&str; 18] = [
    "quantity",
    "isQuantity",
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "ip.isCanonical",
    "semver",
    "isSemver",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "base64.encode",
    "base64.decode",
    "authorizer",
    "format.named",
];

/// What a compiled expression references.
#[derive(Debug, Default)]
pub struct References {
    /// The variables (of the caller's list) it uses.
    pub used: BTreeSet<String>,
    /// `variable.field` selections of those variables, e.g. `("variables", "nodeName")`.
    pub selected: BTreeSet<(String, String)>,
    /// cel-go's message for the first identifier that is neither a variable nor declared.
    pub undeclared: Option<String>,
    /// The first Kubernetes CEL function it calls that is not implemented here.
    pub unsupported: Option<String>,
}

/// Walks a compiled expression whose variables are `variables`: the ones it uses, undeclared
/// identifiers, and calls of Kubernetes functions that are not implemented.
pub fn references(program: &Program, src: &str, variables: &[&str]) -> References {
    fn walk(
        e: &IdedExpr,
        variables: &[&str],
        scope: &mut Vec<String>,
        r: &mut References,
        first_bad: &mut Option<(u64, String)>,
    ) {
        match &e.expr {
            Expr::Ident(name) => {
                if scope.iter().any(|s| s == name) {
                    return;
                }
                match name.as_str() {
                    n if variables.contains(&n) => {
                        r.used.insert(n.to_owned());
                    }
                    n if TYPE_IDENTS.contains(&n) => {}
                    n => {
                        if first_bad.is_none() {
                            *first_bad = Some((e.id, n.to_string()));
                        }
                    }
                }
            }
            Expr::Select(s) => {
                if let Expr::Ident(root) = &s.operand.expr
                    && variables.contains(&root.as_str())
                    && !scope.iter().any(|v| v == root)
                {
                    r.selected.insert((root.clone(), s.field.clone()));
                }
                walk(&s.operand, variables, scope, r, first_bad)
            }
            Expr::Call(c) => {
                let mut name = c.func_name.clone();
                if let Some(t) = &c.target {
                    match &t.expr {
                        Expr::Ident(ns)
                            if NAMESPACES.contains(&ns.as_str())
                                && !scope.iter().any(|s| s == ns) =>
                        {
                            name = format!("{ns}.{}", c.func_name);
                        }
                        _ => walk(t, variables, scope, r, first_bad),
                    }
                }
                let two_var = c.target.is_some()
                    && c.args.len() == 3
                    && matches!(name.as_str(), "all" | "exists" | "existsOne" | "exists_one");
                if r.unsupported.is_none()
                    && (two_var
                        || K8S_MISSING.contains(&name.as_str())
                        || name.starts_with("format."))
                {
                    r.unsupported = Some(name);
                }
                if two_var {
                    // `all(k, v, predicate)`: the first two arguments name variables.
                    let depth = scope.len();
                    for a in &c.args[..2] {
                        if let Expr::Ident(v) = &a.expr {
                            scope.push(v.clone());
                        }
                    }
                    walk(&c.args[2], variables, scope, r, first_bad);
                    scope.truncate(depth);
                } else {
                    for a in &c.args {
                        walk(a, variables, scope, r, first_bad);
                    }
                }
            }
            Expr::Comprehension(c) => comprehension(c, variables, scope, r, first_bad),
            Expr::List(l) => {
                for x in &l.elements {
                    walk(x, variables, scope, r, first_bad);
                }
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            walk(&me.key, variables, scope, r, first_bad);
                            walk(&me.value, variables, scope, r, first_bad);
                        }
                        EntryExpr::StructField(f) => walk(&f.value, variables, scope, r, first_bad),
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            walk(&me.key, variables, scope, r, first_bad);
                            walk(&me.value, variables, scope, r, first_bad);
                        }
                        EntryExpr::StructField(f) => walk(&f.value, variables, scope, r, first_bad),
                    }
                }
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    fn comprehension(
        c: &ComprehensionExpr,
        variables: &[&str],
        scope: &mut Vec<String>,
        r: &mut References,
        first_bad: &mut Option<(u64, String)>,
    ) {
        walk(&c.iter_range, variables, scope, r, first_bad);
        walk(&c.accu_init, variables, scope, r, first_bad);
        let depth = scope.len();
        scope.push(c.accu_var.clone());
        scope.push(c.iter_var.clone());
        if let Some(v) = &c.iter_var2 {
            scope.push(v.clone());
        }
        walk(&c.loop_cond, variables, scope, r, first_bad);
        walk(&c.loop_step, variables, scope, r, first_bad);
        scope.truncate(depth + 1);
        walk(&c.result, variables, scope, r, first_bad);
        scope.truncate(depth);
    }
    let mut r = References::default();
    let mut first_bad = None;
    walk(
        program.expression(),
        variables,
        &mut Vec::new(),
        &mut r,
        &mut first_bad,
    );
    if let Some((id, name)) = first_bad {
        let (line, col, snippet) = match program.source_info().offset_for(id) {
            Some((start, _)) => position(src, start as usize),
            None => (1, 1, src.lines().next().unwrap_or("").to_string()),
        };
        r.undeclared = Some(format!(
            "ERROR: <input>:{line}:{col}: undeclared reference to '{name}' (in container '')\n| {snippet}\n| {:.>width$}",
            "^",
            width = col
        ));
    }
    r
}

/// The 1-based line and column of a character offset, and the line's text.
fn position(src: &str, offset: usize) -> (usize, usize, String) {
    let mut line = 1;
    let mut col = 1;
    for (i, c) in src.chars().enumerate() {
        if i == offset {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    let text = src.lines().nth(line - 1).unwrap_or("").to_string();
    (line, col, text)
}

/// The CEL environment of CRD validation rules: the standard library and macros, the strings,
/// lists and math extensions, `cel.bind`, and what is cheap of the Kubernetes libraries.
pub fn environment() -> Result<Env, String> {
    let mut env = Env::stdlib();
    let e = |r: Result<(), cel::DeclarationError>| r.map_err(|e| e.to_string());
    e(env.add_extension(cel::extensions::strings))?;
    e(env.add_extension(cel::extensions::lists))?;
    e(env.add_extension(cel::extensions::math))?;
    // Kubernetes lists library
    e(env.add_member_overload(
        "isSorted",
        "list_is_sorted",
        LIST_TYPE,
        vec![],
        list_is_sorted,
    ))?;
    e(env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], list_sum))?;
    e(env.add_member_overload("min", "list_min", LIST_TYPE, vec![], list_min))?;
    e(env.add_member_overload("max", "list_max", LIST_TYPE, vec![], list_max))?;
    e(env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_index_of,
    ))?;
    e(env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        list_last_index_of,
    ))?;
    // Kubernetes regex library
    e(env.add_member_overload(
        "find",
        "string_find",
        STRING_TYPE,
        vec![STRING_TYPE],
        string_find,
    ))?;
    e(env.add_member_overload(
        "findAll",
        "string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        string_find_all,
    ))?;
    e(env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        string_find_all_n,
    ))?;
    // cel-go's sets extension
    e(env.add_overload(
        "sets.contains",
        "sets_contains",
        vec![LIST_TYPE, LIST_TYPE],
        sets_contains,
    ))?;
    e(env.add_overload(
        "sets.equivalent",
        "sets_equivalent",
        vec![LIST_TYPE, LIST_TYPE],
        sets_equivalent,
    ))?;
    e(env.add_overload(
        "sets.intersects",
        "sets_intersects",
        vec![LIST_TYPE, LIST_TYPE],
        sets_intersects,
    ))?;
    e(env.add_macro(Macro::receiver("bind", 3, bind_macro)))?;
    Ok(env)
}

/// `cel.bind(var, init, expr)`, expanded as cel-go does into a comprehension over an empty list
/// whose accumulator is `var`.
fn bind_macro(
    helper: &mut cel::parser::MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let is_cel = target
        .as_ref()
        .is_some_and(|t| matches!(&t.expr, Expr::Ident(n) if n == "cel"));
    if !is_cel || args.len() != 3 {
        return Ok(None);
    }
    let (Some(result), Some(init), Some(var)) = (args.pop(), args.pop(), args.pop()) else {
        return Ok(None);
    };
    let Expr::Ident(name) = var.expr else {
        return Err(helper.new_error(
            var.id,
            "cel.bind() variable names must be simple identifiers",
        ));
    };
    let iter_range = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let loop_cond = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
    let loop_step = helper.next_expr(Expr::Ident(name.clone()));
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(
        ComprehensionExpr {
            iter_range,
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: name,
            accu_init: init,
            loop_cond,
            loop_step,
            result,
        },
    )))))
}

// --- functions -------------------------------------------------------------------------------

fn arg(args: &[CowVal<'_, '_>], i: usize) -> Result<CelValue, ExecutionError> {
    match args.get(i) {
        Some(a) => CelValue::try_from(a.as_ref()),
        None => Err(ExecutionError::invalid_argument_count(i + 1, args.len())),
    }
}

fn ret<'b, 'v>(v: CelValue) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let b: Box<dyn Val> = v.try_into()?;
    Ok(CowVal::Owned(b))
}

fn list_arg(
    args: &[CowVal<'_, '_>],
    i: usize,
    f: &str,
) -> Result<Arc<Vec<CelValue>>, ExecutionError> {
    match arg(args, i)? {
        CelValue::List(l) => Ok(l),
        other => Err(ExecutionError::no_such_overload(
            f,
            vec![other.type_of().to_string()],
        )),
    }
}

fn string_arg(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<Arc<String>, ExecutionError> {
    match arg(args, i)? {
        CelValue::String(s) => Ok(s),
        other => Err(ExecutionError::no_such_overload(
            f,
            vec![other.type_of().to_string()],
        )),
    }
}

fn as_f64(v: &CelValue) -> Option<f64> {
    match v {
        CelValue::Int(i) => Some(*i as f64),
        CelValue::UInt(u) => Some(*u as f64),
        CelValue::Float(f) => Some(*f),
        _ => None,
    }
}

/// CEL's heterogeneous equality: numbers compare by value across int, uint and double.
fn cel_eq(a: &CelValue, b: &CelValue) -> bool {
    match (a, b) {
        (CelValue::Int(x), CelValue::UInt(y)) | (CelValue::UInt(y), CelValue::Int(x)) => {
            u64::try_from(*x).is_ok_and(|x| x == *y)
        }
        (CelValue::Float(_), _) | (_, CelValue::Float(_)) => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
        (CelValue::List(x), CelValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| cel_eq(p, q))
        }
        _ => a == b,
    }
}

fn cel_cmp(a: &CelValue, b: &CelValue) -> Result<std::cmp::Ordering, ExecutionError> {
    let ord = match (a, b) {
        (CelValue::Int(x), CelValue::UInt(y)) => i128::from(*x).partial_cmp(&i128::from(*y)),
        (CelValue::UInt(x), CelValue::Int(y)) => i128::from(*x).partial_cmp(&i128::from(*y)),
        (CelValue::Float(_), _) | (_, CelValue::Float(_)) => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => None,
        },
        _ => a.partial_cmp(b),
    };
    ord.ok_or_else(|| ExecutionError::ValuesNotComparable(a.clone(), b.clone()))
}

fn list_is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let l = list_arg(&args, 0, "isSorted")?;
    for w in l.windows(2) {
        if cel_cmp(&w[0], &w[1])? == std::cmp::Ordering::Greater {
            return ret(CelValue::Bool(false));
        }
    }
    ret(CelValue::Bool(true))
}

fn list_sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let l = list_arg(&args, 0, "sum")?;
    let mut acc: Option<CelValue> = None;
    for x in l.iter() {
        acc = Some(match (acc, x) {
            (None, x) => x.clone(),
            (Some(CelValue::Int(a)), CelValue::Int(b)) => CelValue::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Some(CelValue::UInt(a)), CelValue::UInt(b)) => {
                CelValue::UInt(a.checked_add(*b).ok_or_else(|| {
                    ExecutionError::function_error("sum", "unsigned integer overflow")
                })?)
            }
            (Some(CelValue::Float(a)), CelValue::Float(b)) => CelValue::Float(a + b),
            (Some(CelValue::Duration(a)), CelValue::Duration(b)) => CelValue::Duration(
                a.checked_add(b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "duration overflow"))?,
            ),
            (Some(a), b) => {
                return Err(ExecutionError::no_such_overload(
                    "sum",
                    vec![a.type_of().to_string(), b.type_of().to_string()],
                ));
            }
        });
    }
    ret(acc.unwrap_or(CelValue::Int(0)))
}

fn list_extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    f: &str,
    want: std::cmp::Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let l = list_arg(&args, 0, f)?;
    let mut best: Option<&CelValue> = None;
    for x in l.iter() {
        best = match best {
            Some(b) if cel_cmp(x, b)? != want => Some(b),
            _ => Some(x),
        };
    }
    match best {
        Some(b) => ret(b.clone()),
        None => Err(ExecutionError::function_error(
            f,
            format!("{f} called on empty list"),
        )),
    }
}

fn list_min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    list_extreme(args, "min", std::cmp::Ordering::Less)
}

fn list_max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    list_extreme(args, "max", std::cmp::Ordering::Greater)
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let l = list_arg(&args, 0, "indexOf")?;
    let x = arg(&args, 1)?;
    let i = l.iter().position(|v| cel_eq(v, &x));
    ret(CelValue::Int(i.map_or(-1, |i| i as i64)))
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let l = list_arg(&args, 0, "lastIndexOf")?;
    let x = arg(&args, 1)?;
    let i = l.iter().rposition(|v| cel_eq(v, &x));
    ret(CelValue::Int(i.map_or(-1, |i| i as i64)))
}

fn regex_arg(args: &[CowVal<'_, '_>], f: &str) -> Result<(Arc<String>, Regex), ExecutionError> {
    let s = string_arg(args, 0, f)?;
    let re = string_arg(args, 1, f)?;
    let re = Regex::new(&re).map_err(|e| ExecutionError::function_error(f, e))?;
    Ok((s, re))
}

fn string_find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex_arg(&args, "find")?;
    let found = re
        .find(&s)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    ret(CelValue::String(Arc::new(found)))
}

fn find_all(s: &str, re: &Regex, limit: i64) -> CelValue {
    let all = re
        .find_iter(s)
        .take(if limit < 0 {
            usize::MAX
        } else {
            limit as usize
        })
        .map(|m| CelValue::String(Arc::new(m.as_str().to_string())))
        .collect();
    CelValue::List(Arc::new(all))
}

fn string_find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex_arg(&args, "findAll")?;
    ret(find_all(&s, &re, -1))
}

fn string_find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex_arg(&args, "findAll")?;
    let n = match arg(&args, 2)? {
        CelValue::Int(n) => n,
        other => {
            return Err(ExecutionError::no_such_overload(
                "findAll",
                vec![other.type_of().to_string()],
            ));
        }
    };
    ret(find_all(&s, &re, n))
}

fn contains_all(a: &[CelValue], b: &[CelValue]) -> bool {
    b.iter().all(|x| a.iter().any(|y| cel_eq(x, y)))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = list_arg(&args, 0, "sets.contains")?;
    let b = list_arg(&args, 1, "sets.contains")?;
    ret(CelValue::Bool(contains_all(&a, &b)))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = list_arg(&args, 0, "sets.equivalent")?;
    let b = list_arg(&args, 1, "sets.equivalent")?;
    ret(CelValue::Bool(contains_all(&a, &b) && contains_all(&b, &a)))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = list_arg(&args, 0, "sets.intersects")?;
    let b = list_arg(&args, 1, "sets.intersects")?;
    ret(CelValue::Bool(
        a.iter().any(|x| b.iter().any(|y| cel_eq(x, y))),
    ))
}

// --- values -----------------------------------------------------------------------------------

/// Converts a JSON value as Kubernetes does for a value without a schema: numbers are ints
/// when integral (uints beyond `i64`), else doubles; objects are maps with string keys.
pub fn from_json(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            (None, None) => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(a) => CelValue::List(Arc::new(a.iter().map(from_json).collect())),
        Value::Object(m) => map(m.iter().map(|(k, x)| (k.clone(), from_json(x))).collect()),
    }
}

/// A context of `env` binding each `(name, value)`.
pub fn context(
    env: &Arc<Env>,
    variables: Vec<(&str, CelValue)>,
) -> Result<Context<'static, 'static>, ExecutionError> {
    let mut ctx = Context::with_env(Arc::clone(env));
    for (name, value) in variables {
        let boxed: Box<dyn Val> = value.try_into()?;
        ctx.add_variable_as_val(name.to_owned(), boxed);
    }
    Ok(ctx)
}

/// A CEL map with string keys.
pub fn map(entries: Vec<(String, CelValue)>) -> CelValue {
    let map: HashMap<Key, CelValue> = entries
        .into_iter()
        .map(|(k, v)| (Key::String(Arc::new(k)), v))
        .collect();
    CelValue::Map(CelMap { map: Arc::new(map) })
}

/// Evaluates `program` in `ctx`; a panic in the CEL library is an internal error, not a crash.
pub fn run(program: &Program, ctx: &Context<'_, '_>) -> Result<CelValue, ExecutionError> {
    match catch_unwind(AssertUnwindSafe(|| program.execute(ctx))) {
        Ok(r) => r,
        Err(_) => Err(ExecutionError::InternalError(
            "panic while evaluating the expression".to_string(),
        )),
    }
}

/// The message cel-go gives for an evaluation error, and whether it is an overload error.
pub fn describe_error(e: &ExecutionError) -> (bool, String) {
    match e {
        ExecutionError::NoSuchKey(k) => (false, format!("no such key: {k}")),
        ExecutionError::DivisionByZero(_) => (false, "division by zero".to_string()),
        ExecutionError::RemainderByZero(_) => (false, "modulus by zero".to_string()),
        ExecutionError::Overflow(..) => (false, "integer overflow".to_string()),
        ExecutionError::IndexOutOfBounds(i) => {
            (false, format!("index out of bounds: {}", display(i)))
        }
        ExecutionError::UndeclaredReference(r) => (false, format!("undeclared reference to '{r}'")),
        // cel-go's words for a string that is no duration (checked against kube-apiserver 1.36).
        ExecutionError::FunctionError { function, message }
            if function == "duration" && message.starts_with("Parsing Error") =>
        {
            (
                false,
                "type conversion error from 'string' to 'google.protobuf.Duration'".to_owned(),
            )
        }
        ExecutionError::FunctionError { message, .. } => (false, message.clone()),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::UnsupportedIndex(..)
        | ExecutionError::NotSupportedAsMethod { .. } => (true, "no such overload".to_string()),
        other => (false, other.to_string()),
    }
}

fn display(v: &CelValue) -> String {
    match v {
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        CelValue::Float(f) => go_float(*f),
        CelValue::String(s) => s.to_string(),
        CelValue::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}
