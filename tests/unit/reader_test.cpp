// tests/unit/reader_test.cpp — the reader (SPEC §3): atoms, strings, brackets, reader macros,
// dtype suffixes, source locations and every parse error.
#include "reader/reader.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

uint32_t file_of(std::string_view text) { return sources::add("t.shf", std::string(text)); }

std::vector<Value> read(std::string_view text) { return read_all(text, file_of(text)); }

Value read1(std::string_view text) {
  auto forms = read(text);
  EXPECT_EQ(forms.size(), 1u) << "in: " << text;
  return forms.empty() ? Value::nil() : forms[0];
}

// Forms back in reader syntax, so that expectations read like the source they came from.
std::string show(const Value& v) {
  if (v.is(Kind::Str)) return "\"" + v.as_str() + "\"";
  if (!v.is_list()) return print_value(v);
  const ListObj& l = v.as_list();
  const char* brackets = l.kind == ListKind::Paren ? "()" : l.kind == ListKind::Bracket ? "[]" : "{}";
  std::string s(1, brackets[0]);
  for (size_t i = 0; i < l.items.size(); ++i) s += (i ? " " : "") + show(l.items[i]);
  s += brackets[1];
  if (l.suffix) s += " :" + std::string(dtype_name(*l.suffix));
  return s;
}

std::string show_all(std::string_view text) {
  std::string s;
  for (const Value& v : read(text)) s += (s.empty() ? "" : " | ") + show(v);
  return s;
}

// The parse error of `text` (fails the test when the text reads cleanly).
SheafError read_error(std::string_view text, ReaderOptions opts = {}) {
  try {
    read_all(text, file_of(text), opts);
  } catch (const SheafError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a parse error for: " << text;
  return SheafError("");
}

float read_float(std::string_view text) {
  Value v = read1(text);
  EXPECT_TRUE(v.is(Kind::Float)) << text << " read as " << kind_name(v.kind());
  return v.is(Kind::Float) ? v.as_float() : 0.0f;
}

// ---- atoms ----------------------------------------------------------------------------------

TEST(Reader, Integers) {
  for (auto [text, want] : {std::pair{"42", 42}, {"-7", -7}, {"0", 0}, {"+5", 5}, {"007", 7}}) {
    Value v = read1(text);
    ASSERT_TRUE(v.is(Kind::Int)) << text;
    EXPECT_EQ(v.as_int(), want) << text;
  }
  Value max = read1("9223372036854775807");
  ASSERT_TRUE(max.is(Kind::Int));
  EXPECT_EQ(max.as_int(), INT64_MAX);
  Value min = read1("-9223372036854775808");
  ASSERT_TRUE(min.is(Kind::Int));
  EXPECT_EQ(min.as_int(), INT64_MIN);
}

TEST(Reader, IntegersOutsideI64AreErrors) {
  for (std::string text : {std::string("9223372036854775808"), std::string("-9223372036854775809"),
                           std::string("123456789012345678901234567890123456789"), std::string(50, '9')}) {
    SheafError e = read_error("(+ 1 " + text + ")");
    EXPECT_EQ(std::string(e.what()), "integer literal out of range: " + text + " does not fit in 64 bits");
    EXPECT_EQ(e.loc.line, 1u);
    EXPECT_EQ(e.loc.col, 6u);
    EXPECT_EQ(e.loc.len, text.size());
  }
  EXPECT_STREQ(read_error("0:99999999999999999999").what(), "integer literal out of range: 99999999999999999999 does not fit in 64 bits");
  EXPECT_EQ(read_float("9223372036854775808.0"), 9223372036854775808.0f);  // as a float: a point or an exponent
  EXPECT_EQ(read_float("1e39"), INFINITY);
}

TEST(Reader, Floats) {
  EXPECT_EQ(read_float("3.14"), 3.14f);
  EXPECT_EQ(read_float("1."), 1.0f);
  EXPECT_EQ(read_float(".5"), 0.5f);
  EXPECT_EQ(read_float("-.5"), -0.5f);
  EXPECT_EQ(read_float("1e-8"), 1e-8f);
  EXPECT_EQ(read_float("-3e4"), -30000.0f);
  EXPECT_EQ(read_float("2.5E+3"), 2500.0f);
  EXPECT_EQ(read_float("+1.25"), 1.25f);
  EXPECT_EQ(read_float("0.0"), 0.0f);
  float neg_zero = read_float("-0.0");
  EXPECT_TRUE(neg_zero == 0.0f && std::signbit(neg_zero));
  EXPECT_EQ(read_float("1e40"), INFINITY);
  EXPECT_EQ(read_float("1e-60"), 0.0f);
}

TEST(Reader, SpecialFloatWords) {
  for (const char* text : {"inf", "Inf", "+inf", "infinity", "INFINITY"}) EXPECT_EQ(read_float(text), INFINITY) << text;
  for (const char* text : {"-inf", "-Infinity", "-INF"}) EXPECT_EQ(read_float(text), -INFINITY) << text;
  for (const char* text : {"nan", "NaN", "-nan", "NAN"}) EXPECT_TRUE(std::isnan(read_float(text))) << text;
}

TEST(Reader, NearNumbersAreSymbols) {
  for (const char* text : {"1e", "e5", "1.2.3", "--1", "1-", "+", "-", ".", "infx", "nan?", "1e+", "0x10"}) {
    Value v = read1(text);
    EXPECT_TRUE(v.is(Kind::Symbol)) << text << " read as " << kind_name(v.kind());
  }
}

TEST(Reader, Constants) {
  EXPECT_TRUE(read1("true").is(Kind::Bool) && read1("true").as_bool());
  EXPECT_TRUE(read1("false").is(Kind::Bool) && !read1("false").as_bool());
  EXPECT_TRUE(read1("nil").is_nil());
  EXPECT_TRUE(read1("nil?").is(Kind::Symbol));
  EXPECT_TRUE(read1("True").is(Kind::Symbol));
}

TEST(Reader, SymbolsWithOperatorCharacters) {
  for (const char* name : {"+", "-", "*", "/", "//", "**", "%", "@", "=", "==", "!=", "<", "<=", ">", ">=", "->",
                           "->>", "as->", "char->id", "empty?", "...", "_", "x.y", "a/b", "snake_case", "x1"}) {
    Value v = read1(name);
    ASSERT_TRUE(v.is(Kind::Symbol)) << name << " read as " << kind_name(v.kind());
    EXPECT_EQ(v.as_str(), name);
  }
}

TEST(Reader, SymbolsInternById) {
  auto forms = read("abc abc abd");
  ASSERT_EQ(forms.size(), 3u);
  EXPECT_EQ(forms[0].symbol(), forms[1].symbol());
  EXPECT_NE(forms[0].symbol(), forms[2].symbol());
  EXPECT_EQ(forms[0].symbol(), symbols::intern("abc"));
}

TEST(Reader, Keywords) {
  for (auto [text, name] : {std::pair{":a", "a"}, {":axis", "axis"}, {":f32", "f32"}, {":char->id", "char->id"},
                            {":a.b/c", "a.b/c"}, {":1", "1"}, {":x:y", "x:y"}}) {
    Value v = read1(text);
    ASSERT_TRUE(v.is(Kind::Keyword)) << text;
    EXPECT_EQ(v.as_str(), name);
  }
  EXPECT_EQ(show_all(":a :b"), ":a | :b");
  EXPECT_EQ(std::string(read_error(":").what()), "Invalid keyword ':' (a keyword needs a name)");
}

TEST(Reader, ClassifyAtom) {
  SrcLoc loc{0, 3, 4, 2};
  EXPECT_TRUE(classify_atom("12", loc).is(Kind::Int));
  EXPECT_TRUE(classify_atom("1.5", loc).is(Kind::Float));
  EXPECT_TRUE(classify_atom(":k", loc).is(Kind::Keyword));
  EXPECT_TRUE(classify_atom("3:4", loc).is(Kind::Slice));
  Value sym = classify_atom("ab", loc);
  ASSERT_TRUE(sym.is(Kind::Symbol));
  EXPECT_EQ(sym.loc().line, 3u);
  EXPECT_EQ(sym.loc().col, 4u);
}

// ---- slices ---------------------------------------------------------------------------------

TEST(Reader, SliceAtoms) {
  Value s = read1("100:200");
  ASSERT_TRUE(s.is(Kind::Slice));
  EXPECT_EQ(s.as_slice().start, 100);
  EXPECT_EQ(s.as_slice().end, std::optional<int64_t>(200));

  Value open = read1("5:");
  ASSERT_TRUE(open.is(Kind::Slice));
  EXPECT_EQ(open.as_slice().start, 5);
  EXPECT_FALSE(open.as_slice().end.has_value());

  Value neg = read1("-3:-1");
  ASSERT_TRUE(neg.is(Kind::Slice));
  EXPECT_EQ(neg.as_slice().start, -3);
  EXPECT_EQ(neg.as_slice().end, std::optional<int64_t>(-1));

  EXPECT_EQ(print_value(read1("100:200")), "100:200");
  EXPECT_EQ(print_value(read1("5:")), "5:");
  EXPECT_EQ(show(read1("(h 100:200)")), "(h 100:200)");
}

TEST(Reader, NonIntegerSlicesAreSymbols) {
  for (const char* text : {"a:b", "1:x", "1.5:2", "1:2:3", "x:"}) {
    Value v = read1(text);
    EXPECT_TRUE(v.is(Kind::Symbol)) << text << " read as " << kind_name(v.kind());
  }
}

// ---- strings --------------------------------------------------------------------------------

TEST(Reader, Strings) {
  Value s = read1(R"("hello world")");
  ASSERT_TRUE(s.is(Kind::Str));
  EXPECT_EQ(s.as_str(), "hello world");
  EXPECT_EQ(read1(R"("")").as_str(), "");
  EXPECT_EQ(read1("\"a;b,c (d)\"").as_str(), "a;b,c (d)");
  EXPECT_EQ(read1("\"two\nlines\"").as_str(), "two\nlines");
  EXPECT_EQ(read1("\"π ≈ 3.14\"").as_str(), "π ≈ 3.14");
}

TEST(Reader, StringEscapes) {
  EXPECT_EQ(read1(R"("a\nb")").as_str(), "a\nb");
  EXPECT_EQ(read1(R"("a\tb")").as_str(), "a\tb");
  EXPECT_EQ(read1(R"("a\rb")").as_str(), "a\rb");
  EXPECT_EQ(read1(R"("say \"hi\"")").as_str(), "say \"hi\"");
  EXPECT_EQ(read1(R"("back\\slash")").as_str(), "back\\slash");
  EXPECT_EQ(read1(R"("\\n")").as_str(), "\\n");  // a backslash followed by n
  EXPECT_EQ(read1(R"("\q")").as_str(), "\\q");   // unknown escape keeps the backslash
  EXPECT_EQ(read1(R"("\d+")").as_str(), "\\d+");
}

TEST(Reader, StringsAreDelimiters) {
  EXPECT_EQ(show_all(R"(a"b"c)"), R"(a | "b" | c)");
  EXPECT_EQ(show(read1(R"(("x""y"))")), R"(("x" "y"))");
}

// ---- whitespace and comments ----------------------------------------------------------------

TEST(Reader, CommasAreWhitespace) {
  EXPECT_EQ(show(read1("[1, 2, 3]")), "[1 2 3]");
  EXPECT_EQ(show(read1("{:a 1, :b 2}")), "{:a 1 :b 2}");
  EXPECT_EQ(show(read1(",,(f,x,,y),")), "(f x y)");
  EXPECT_EQ(show_all("1,2"), "1 | 2");
}

TEST(Reader, Comments) {
  EXPECT_EQ(show_all("; nothing here\n"), "");
  EXPECT_EQ(show_all(";; header\n(+ 1 2) ; trailing\n;; footer"), "(+ 1 2)");
  EXPECT_EQ(show(read1("(f ; comment ) inside\n x)")), "(f x)");
  EXPECT_EQ(show_all("a;b\nc"), "a | c");
  EXPECT_EQ(show(read1("\"; not a comment\"")), "\"; not a comment\"");
}

TEST(Reader, EmptyInput) {
  EXPECT_TRUE(read("").empty());
  EXPECT_TRUE(read("  \n\t\r ,,").empty());
}

TEST(Reader, Whitespace) {
  EXPECT_EQ(show(read1("(a\tb\r\nc  d\n\ne)")), "(a b c d e)");
}

// ---- reader macros ------------------------------------------------------------------------

TEST(Reader, QuoteForms) {
  EXPECT_EQ(show(read1("'x")), "(quote x)");
  EXPECT_EQ(show(read1("'(1 2)")), "(quote (1 2))");
  EXPECT_EQ(show(read1("`(a ~b ~@c)")), "(quasiquote (a (unquote b) (unquote-splicing c)))");
  EXPECT_EQ(show(read1("''x")), "(quote (quote x))");
  EXPECT_EQ(show(read1("' x")), "(quote x)");
  EXPECT_EQ(show(read1("`[~x]")), "(quasiquote [(unquote x)])");
  EXPECT_EQ(show_all("'a'b"), "(quote a) | (quote b)");
}

TEST(Reader, QuoteHeadsAreParenListsOfSymbols) {
  Value q = read1("~@xs");
  ASSERT_TRUE(q.is_list());
  const ListObj& l = q.as_list();
  EXPECT_EQ(l.kind, ListKind::Paren);
  ASSERT_EQ(l.items.size(), 2u);
  ASSERT_TRUE(l.items[0].is(Kind::Symbol));
  EXPECT_EQ(l.items[0].as_str(), "unquote-splicing");
  EXPECT_EQ(l.items[1].as_str(), "xs");
}

// ---- brackets -----------------------------------------------------------------------------

TEST(Reader, ListKinds) {
  EXPECT_EQ(read1("(f x)").as_list().kind, ListKind::Paren);
  EXPECT_EQ(read1("[1 2]").as_list().kind, ListKind::Bracket);
  EXPECT_EQ(read1("{:a 1}").as_list().kind, ListKind::Brace);
  EXPECT_EQ(read1("()").as_list().items.size(), 0u);
  EXPECT_EQ(read1("[]").as_list().items.size(), 0u);
  EXPECT_EQ(read1("{}").as_list().items.size(), 0u);
  EXPECT_EQ(show(read1("(defn f [x] {:y [x (g x)]})")), "(defn f [x] {:y [x (g x)]})");
  EXPECT_EQ(show_all("(a)(b)[c]{d e}"), "(a) | (b) | [c] | {d e}");
}

TEST(Reader, DtypeSuffix) {
  for (auto [text, want] : {std::pair{"[1 2] :i32", DType::I32}, {"[1 2] :f32", DType::F32},
                            {"[1 2] :f16", DType::F16}, {"[1 2] :bf16", DType::BF16},
                            {"[1 2] :u32", DType::U32}, {"[true] :bool", DType::Bool}, {"[1 2]:i32", DType::I32},
                            {"[1 2]\n  :i32", DType::I32}, {"[1 2], :i32", DType::I32}}) {
    Value v = read1(text);
    ASSERT_TRUE(v.is_list()) << text;
    EXPECT_EQ(v.as_list().suffix, std::optional<DType>(want)) << text;
  }
  EXPECT_FALSE(read1("[1 2]").as_list().suffix.has_value());
}

TEST(Reader, OtherKeywordsAfterVectorsAreArguments) {
  EXPECT_EQ(show(read1("(sum [1 2] :axis 0)")), "(sum [1 2] :axis 0)");
  EXPECT_EQ(show(read1("(cast [1 2] :f64)")), "(cast [1 2] :f64)");
  EXPECT_EQ(show(read1("(f (g) :i32)")), "(f (g) :i32)");      // only after bracket literals
  EXPECT_EQ(show(read1("(f {:a 1} :i32)")), "(f {:a 1} :i32)");
  EXPECT_EQ(show(read1("(f [1] :i32x)")), "(f [1] :i32x)");
  EXPECT_EQ(show(read1("(let [t [0 1] :i32] t)")), "(let [t [0 1] :i32] t)");
  Value let = read1("(let [t [0 1] :i32] t)");
  const ListObj& bindings = let.as_list().items[1].as_list();
  ASSERT_EQ(bindings.items.size(), 2u);  // the suffix is attached, not a third binding form
  EXPECT_EQ(bindings.items[1].as_list().suffix, std::optional<DType>(DType::I32));
  EXPECT_FALSE(bindings.suffix.has_value());
}

TEST(Reader, QuotedVectorsTakeNoSuffix) {
  // '[0 1] :i32 is quoted data followed by a keyword argument.
  EXPECT_EQ(show_all("'[1 2] :i32"), "(quote [1 2]) | :i32");
  EXPECT_EQ(show(read1("(f '[1 2] :i32)")), "(f (quote [1 2]) :i32)");
  EXPECT_EQ(show(read1("'([1 2] :i32)")), "(quote ([1 2] :i32))");  // only the quoted form itself
  EXPECT_EQ(show_all("'x [1 2] :i32"), "(quote x) | [1 2] :i32");
}

TEST(Reader, NestedSuffixes) {
  EXPECT_EQ(show(read1("[[1 2] :i32 [3 4]] :f16")), "[[1 2] :i32 [3 4]] :f16");
}

// ---- source locations ---------------------------------------------------------------------

TEST(Reader, Locations) {
  std::string text = "(defn f [x]\n  (+ x\n     (g y)))\n";
  uint32_t file = file_of(text);
  auto forms = read_all(text, file);
  ASSERT_EQ(forms.size(), 1u);
  const Value& defn = forms[0];
  EXPECT_EQ(defn.loc().file, file);
  EXPECT_EQ(defn.loc().line, 1u);
  EXPECT_EQ(defn.loc().col, 1u);
  const auto& items = defn.as_list().items;
  EXPECT_EQ(items[0].loc().line, 1u);  // defn
  EXPECT_EQ(items[0].loc().col, 2u);
  EXPECT_EQ(items[0].loc().len, 4u);
  EXPECT_EQ(items[1].loc().col, 7u);   // f
  EXPECT_EQ(items[2].loc().col, 9u);   // [x]
  EXPECT_EQ(items[2].loc().len, 3u);
  const Value& plus = items[3];
  EXPECT_EQ(plus.loc().line, 2u);
  EXPECT_EQ(plus.loc().col, 3u);
  const Value& x = plus.as_list().items[1];
  EXPECT_EQ(x.loc().line, 2u);
  EXPECT_EQ(x.loc().col, 6u);
  const Value& g_call = plus.as_list().items[2];
  EXPECT_EQ(g_call.loc().line, 3u);
  EXPECT_EQ(g_call.loc().col, 6u);
  EXPECT_EQ(g_call.loc().len, 5u);
  const Value& y = g_call.as_list().items[1];
  EXPECT_EQ(y.loc().line, 3u);
  EXPECT_EQ(y.loc().col, 9u);
  EXPECT_EQ(sources::describe(y.loc()), "t.shf:3:9");
  EXPECT_EQ(sources::line_text(file, 3), "     (g y)))");
}

TEST(Reader, LocationsAfterCommentsStringsAndQuotes) {
  std::string text = "; c\n\"a\nb\" 'q\n  sym";
  auto forms = read_all(text, file_of(text));
  ASSERT_EQ(forms.size(), 3u);
  EXPECT_EQ(forms[1].loc().line, 3u);  // (quote q) at the quote character
  EXPECT_EQ(forms[1].loc().col, 4u);
  EXPECT_EQ(forms[1].as_list().items[1].loc().col, 5u);
  EXPECT_EQ(forms[2].loc().line, 4u);
  EXPECT_EQ(forms[2].loc().col, 3u);
}

TEST(Reader, ColumnsCountCodePoints) {
  std::string text = "(\"λλ\" x)";
  Value v = read_all(text, file_of(text))[0];
  EXPECT_EQ(v.as_list().items[1].loc().col, 7u);
}

TEST(Reader, FormOffsets) {
  std::string text = "  (a b) ; c\n[1 2] :i32 x";
  auto forms = read_forms(text, file_of(text));
  ASSERT_EQ(forms.size(), 3u);
  EXPECT_EQ(text.substr(forms[0].begin, forms[0].end - forms[0].begin), "(a b)");
  EXPECT_EQ(text.substr(forms[1].begin, forms[1].end - forms[1].begin), "[1 2] :i32");
  EXPECT_EQ(text.substr(forms[2].begin, forms[2].end - forms[2].begin), "x");
}

// ---- parse errors -------------------------------------------------------------------------

TEST(ReaderErrors, UnexpectedClosing) {
  SheafError e = read_error("(+ 1 2))");
  EXPECT_EQ(std::string(e.what()), "Unexpected closing ')'");
  EXPECT_EQ(e.loc.line, 1u);
  EXPECT_EQ(e.loc.col, 8u);
  EXPECT_EQ(std::string(read_error("]").what()), "Unexpected closing ']'");
  EXPECT_EQ(std::string(read_error("x\n  }").what()), "Unexpected closing '}'");
  EXPECT_EQ(read_error("x\n  }").loc.line, 2u);
}

TEST(ReaderErrors, MismatchedClosing) {
  SheafError e = read_error("(f\n [1 2)");
  std::string msg = e.what();
  EXPECT_EQ(msg.rfind("Unexpected closing ')'", 0), 0u) << msg;
  EXPECT_NE(msg.find("']'"), std::string::npos) << msg;  // names the bracket expected
  EXPECT_EQ(e.loc.line, 2u);
  EXPECT_EQ(e.loc.col, 6u);
}

TEST(ReaderErrors, Unclosed) {
  SheafError list = read_error("\n(defn f [x]\n  (+ x 1)");
  EXPECT_EQ(std::string(list.what()), "Unclosed list (opened at line 2)");
  EXPECT_EQ(list.loc.line, 2u);
  EXPECT_EQ(list.loc.col, 1u);
  EXPECT_EQ(std::string(read_error("[1 2").what()), "Unclosed vector (opened at line 1)");
  EXPECT_EQ(std::string(read_error("{:a 1").what()), "Unclosed dict (opened at line 1)");
  EXPECT_EQ(std::string(read_error("(a [b {c").what()), "Unclosed dict (opened at line 1)");  // innermost
}

TEST(ReaderErrors, UnterminatedString) {
  SheafError e = read_error("(print \"abc)");
  EXPECT_EQ(std::string(e.what()), "Unterminated string");
  EXPECT_EQ(e.loc.col, 8u);
  EXPECT_EQ(std::string(read_error("\"ends in backslash\\").what()), "Unterminated string");
  EXPECT_EQ(std::string(read_error("\"escaped quote\\\"").what()), "Unterminated string");
}

TEST(ReaderErrors, OddDict) {
  SheafError e = read_error("(f {:a 1 :b})");
  EXPECT_EQ(std::string(e.what()), "Dict requires even number of elements (key-value pairs)");
  EXPECT_EQ(e.loc.col, 4u);
  EXPECT_EQ(std::string(read_error("{1}").what()), "Dict requires even number of elements (key-value pairs)");
}

TEST(ReaderErrors, DanglingQuote) {
  for (const char* text : {"'", "`", "~", "~@", "(a ')"}) {
    SheafError e = read_error(text);
    EXPECT_FALSE(std::string(e.what()).empty()) << text;
  }
  EXPECT_EQ(std::string(read_error("'").what()), "Expected a form after quote");
}

TEST(ReaderErrors, NestingLimit) {
  ReaderOptions opts{.max_depth = 50};
  EXPECT_NO_THROW(read_all(std::string(50, '(') + std::string(50, ')'), 0, opts));
  for (const std::string& text : {std::string(60, '(') + std::string(60, ')'), std::string(60, '['),
                                  std::string(60, '\'') + "x", std::string(30, '`') + std::string(30, '~') + "x"}) {
    SheafError e = read_error(text, opts);
    EXPECT_NE(std::string(e.what()).find("Nesting too deep"), std::string::npos) << e.what();
  }
}

TEST(ReaderErrors, DeepNestingIsAnErrorNotACrash) {
  std::string deep(1'000'000, '(');
  SheafError e = read_error(deep);  // default max_depth
  EXPECT_NE(std::string(e.what()).find("Nesting too deep"), std::string::npos) << e.what();
  EXPECT_EQ(read_status(deep), ReadStatus::Error);
}

// ---- read_status --------------------------------------------------------------------------

TEST(ReadStatus, Complete) {
  EXPECT_EQ(read_status(""), ReadStatus::Complete);
  EXPECT_EQ(read_status("(+ 1 2)"), ReadStatus::Complete);
  EXPECT_EQ(read_status("(f \"a)\") ; (unclosed in a comment"), ReadStatus::Complete);
  EXPECT_EQ(read_status("x y z"), ReadStatus::Complete);
}

TEST(ReadStatus, Incomplete) {
  EXPECT_EQ(read_status("(defn f [x]"), ReadStatus::Incomplete);
  EXPECT_EQ(read_status("[1 2"), ReadStatus::Incomplete);
  EXPECT_EQ(read_status("{:a"), ReadStatus::Incomplete);
  EXPECT_EQ(read_status("(print \"abc"), ReadStatus::Incomplete);
  EXPECT_EQ(read_status("'"), ReadStatus::Incomplete);
  EXPECT_EQ(read_status("(f x) (g"), ReadStatus::Incomplete);
}

TEST(ReadStatus, Error) {
  EXPECT_EQ(read_status(")"), ReadStatus::Error);
  EXPECT_EQ(read_status("(f]"), ReadStatus::Error);
  EXPECT_EQ(read_status("{:a}"), ReadStatus::Error);
  EXPECT_EQ(read_status(":"), ReadStatus::Error);
  EXPECT_EQ(read_status("(f x)) (g"), ReadStatus::Error);
}

}  // namespace
}  // namespace sheaf
