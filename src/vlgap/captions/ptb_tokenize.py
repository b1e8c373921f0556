"""Pure-Python twin of coco-caption's tokenizer: Stanford PTBTokenizer 3.4.1 + punctuation removal.

pycocoevalcap runs `java edu.stanford.nlp.process.PTBTokenizer -preserveLines -lowerCase` from
stanford-corenlp-3.4.1.jar over all captions joined by newlines, then drops the tokens in
`PUNCTUATIONS`. This module reimplements that lexer (a JFlex scanner: longest match wins, the
earlier rule wins a tie, a trailing context `r1/r2` counts towards the match length but only `r1`
becomes the token) rule by rule, so `ptb_tokenize(captions)` returns the strings pycocoevalcap
feeds its scorers, without starting a JVM.

Faithful details worth knowing (they are what the jar does, not choices made here):
  - parentheses become "-lrb-"/"-rrb-" after lower-casing, so they survive the punctuation filter
    (which lists the upper-case forms); "[" and "{" likewise become "-lsb-" and "-lcb-";
  - fractions, phone numbers and SGML tags may hold a non-breaking space (U+00A0) inside one
    token: BLEU and CIDEr split on it (str.split()), ROUGE-L does not (str.split(" "));
  - "cannot", "gonna", "wanna", ... are split ("can not", "gon na"); "don't" -> "do n't";
  - characters the lexer does not know (emoji, most symbols outside the BMP) are deleted.

One deliberate difference: line-break characters inside a caption other than "\\n" (CR, VT, FF,
U+2028, U+2029) are read as spaces. pycocoevalcap only replaces "\\n", so the jar sees extra lines
and every later caption is paired with the wrong tokens; matching that would be matching a bug.
"""
from __future__ import annotations

import re
from functools import lru_cache
from re import _compiler as sre_compile, _constants as sre_c, _parser as sre_parse
from typing import Callable, Sequence

import regex

from vlgap.captions import _ptb_classes

#: the tokens pycocoevalcap's PTBTokenizer wrapper removes after tokenising (its PUNCTUATIONS list)
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-",
                          ".", "?", "!", ",", ":", "-", "--", "...", ";"])

# Line breaks the jar would turn into extra lines (see module docstring); "\n" is replaced by
# pycocoevalcap itself. U+0085 is absent on purpose: the lexer reads it as an ellipsis.
_FOREIGN_LINE_BREAKS = str.maketrans({"\r": " ", "\x0b": " ", "\x0c": " ", "\u2028": " ", "\u2029": " "})


# Character classes: JFlex's [:letter:], [:digit:], [:uppercase:] as frozen in the jar's tables
# (see _ptb_classes). The scanner works on UTF-16 units, so code points above U+FFFF never match.

def _regex_class(ranges: str) -> str:
    out = []
    for item in ranges.split():
        a, _, b = item.partition("-")
        out.append(f"\\u{a.lower()}" + (f"-\\u{b.lower()}" if b else ""))
    return "".join(out)


@lru_cache(maxsize=None)
def _classes() -> dict[str, str]:
    return {"LETTER_CLASS": _regex_class(_ptb_classes.LETTER),
            "DIGIT_CLASS": _regex_class(_ptb_classes.DIGIT),
            "UPPER_CLASS": _regex_class(_ptb_classes.UPPERCASE)}


# JFlex's %caseless also admits the characters Java maps onto a letter's case: dotted/dotless I,
# the long s and the Kelvin sign ("W\u0130s." is the abbreviation "Wis.").
_CASELESS_EXTRA = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


def _ci(word: str) -> str:
    """A literal under JFlex %caseless: each letter matches both cases; classes stay as written."""
    out = []
    for ch in word:
        if ch.isalpha() and ch.lower() != ch.upper():
            out.append(f"[{ch.lower()}{ch.upper()}{_CASELESS_EXTRA.get(ch.lower(), '')}]")
        else:
            out.append(regex.escape(ch))
    return "".join(out)


def _alt(*words: str) -> str:
    return "(?:" + "|".join(_ci(w) for w in words) + ")"


def _macros() -> dict[str, str]:
    c = _classes()
    m: dict[str, str] = {}
    L = f"[{c['LETTER_CLASS']}]"
    D = f"(?:[{c['DIGIT_CLASS']}]|[\\u07c0-\\u07c9])"
    m["SGML"] = (r"(?:<(?:[!?][A-Za-z\-][^>\r\n]*|[A-Za-z][A-Za-z0-9_:.\-]*(?:[ ]+(?:[A-Za-z][A-Za-z0-9_:.\-]*|"
                 r"[A-Za-z][A-Za-z0-9_:.\-]*[ ]*=[ ]*['\"][^\r\n'\"]*['\"]))*[ ]*\/?|\/[A-Za-z][A-Za-z0-9_:.\-]*)[ ]*>)")
    m["SPMDASH"] = "(?:&" + _alt("MD", "mdash", "ndash") + ";|[\\x96\\x97\\u2013\\u2014\\u2015])"
    m["SPAMP"] = _ci("&amp;")
    m["SPPUNC"] = "(?:&(?:" + "|".join(_ci(w) for w in ("HT", "TL", "UR", "LR", "QC", "QL", "QR", "odq", "cdq")) + "|#[0-9]+);)"
    m["SPLET"] = "(?:&[aeiouAEIOU]" + _alt("acute", "grave", "uml") + ";)"
    m["SPACE"] = r"[ \t\xa0\u2000-\u200a\u3000]"
    m["SPACES"] = m["SPACE"] + "+"
    m["NEWLINE"] = r"(?:\r\n|\r|\n|\u2028|\u2029|\x0b|\x0c|\x85)"
    m["SPACENL"] = f"(?:{m['SPACE']}|{m['NEWLINE']})"
    m["SPACENLS"] = m["SPACENL"] + "+"
    m["SENTEND"] = f"(?:{m['SPACENL']}(?:{m['SPACENL']}|[{c['UPPER_CLASS']}]|{m['SGML']}))"
    m["DIGIT"] = D
    m["DATE"] = f"(?:{D}{{1,2}}[\\-\\/]{D}{{1,2}}[\\-\\/]{D}{{2,4}})"
    # (alternatives ordered so that a backtracking match is also the longest one)
    m["NUM"] = f"(?:{D}*(?:[.:,\\xad\\u066b\\u066c]{D}+)+|{D}+)"
    m["NUMBER"] = f"(?:[\\-+]?{m['NUM']})"
    m["SUBSUPNUM"] = r"(?:[\u207a\u207b\u208a\u208b]?(?:[\u2070\xb9\xb2\xb3\u2074-\u2079]+|[\u2080-\u2089]+))"
    m["FRAC"] = f"(?:(?:{D}{{1,4}}[\\- \\xa0])?{D}{{1,4}}(?:\\\\?\\/|\\u2044){D}{{1,4}})"
    m["FRAC2"] = r"[\xbc\xbd\xbe\u2153-\u215e]"
    m["DOLSIGN"] = r"(?:[A-Z]*\$|#)"
    m["DOLSIGN2"] = r"[\xa2\xa3\xa4\xa5\x80\u20a0\u20ac\u060b\u0e3f\u20a4\uffe0\uffe1\uffe5\uffe6]"
    extra_letters = (
        r"\xad\u0237-\u024f\u02c2-\u02c5\u02d2-\u02df\u02e5-\u02ff\u0300-\u036f\u0370-\u037d\u0384\u0385"
        r"\u03cf\u03f6\u03fc-\u03ff\u0483-\u0487\u04cf\u04f6-\u04ff\u0510-\u0525\u055a-\u055f\u0591-\u05bd"
        r"\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0615-\u061a\u063b-\u063f\u064b-\u065e\u0670\u06d6-\u06ef"
        r"\u06fa-\u06ff\u070f\u0711\u0730-\u074f\u0750-\u077f\u07a6-\u07b1\u07ca-\u07f5\u07fa\u0900-\u0903"
        r"\u093c\u093e-\u094e\u0951-\u0955\u0962-\u0963\u0981-\u0983\u09bc-\u09c4\u09c7\u09c8\u09cb-\u09cd"
        r"\u09d7\u09e2\u09e3\u0a01-\u0a03\u0a3c\u0a3e-\u0a4f\u0a81-\u0a83\u0abc-\u0acf\u0b82\u0bbe-\u0bc2"
        r"\u0bc6-\u0bc8\u0bca-\u0bcd\u0c01-\u0c03\u0c3e-\u0c56\u0d3e-\u0d44\u0d46-\u0d48\u0e30-\u0e3a"
        r"\u0e47-\u0e4e\u0eb1-\u0ebc\u0ec8-\u0ecd")
    LETTER = f"(?:{L}|{m['SPLET']}|[{extra_letters}])"
    m["LETTER"] = LETTER
    m["WORD"] = f"(?:{LETTER}(?:{LETTER}|{D})*(?:[.!?]{LETTER}(?:{LETTER}|{D})*)*)"
    m["APOS"] = "(?:['\\x92\\u2019]|" + _ci("&apos;") + ")"
    m["APOSETCETERA"] = f"(?:{m['APOS']}|[`\\x91\\u2018\\u201b])"
    LD = f"(?:{L}|{D})"
    m["HYPHEN"] = r"[\-_\u058a\u2010\u2011]"
    m["THING"] = (f"(?:(?:[dDoOlL]{m['APOSETCETERA']}{LD})?{LD}+"
                  f"(?:{m['HYPHEN']}(?:[dDoOlL]{m['APOSETCETERA']}{LD})?{LD}+)*)")
    m["THINGA"] = f"(?:[A-Z]+(?:(?:[+&]|{m['SPAMP']})[A-Z]+)+)"
    m["THING3"] = r"(?:[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?\/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2})"
    m["ACRO"] = ("(?:[A-Za-z](?:\\.[A-Za-z])+|" + _alt("Canada", "Sino", "Korean", "EU", "Japan", "non")
                 + "-" + _ci("U.S") + "|" + _ci("U.S.-") + "(?:" + _ci("U.K") + "|" + _ci("U.S.S.R") + "))")
    m["HTHING"] = f"(?:[A-Za-z0-9][A-Za-z0-9.,\\xad]*(?:-(?:[A-Za-z0-9\\xad]+|{m['ACRO']}\\.))+)"
    m["REDAUX"] = f"(?:{m['APOS']}(?:[msdMSD]|{_alt('re', 've', 'll')}))"
    m["SWORD"] = r"(?:[A-Za-z\xad]*[A-MO-Za-mo-z]\xad*)"
    m["SREDAUX"] = f"(?:{_ci('n')}{m['APOSETCETERA']}{_ci('t')})"
    A, AE = m["APOS"], m["APOSETCETERA"]
    m["APOWORD"] = ("(?:" + "|".join([
        f"{A}{_ci('n')}{A}?",
        f"[lLdDjJ]{A}",
        f"{_ci('Dunkin')}{A}",
        f"{_ci('somethin')}{A}",
        f"{_ci('ol')}{A}",
        f"{A}{_ci('em')}",
        f"[A-HJ-XZn]{AE}{L}{{2}}{L}*",
        f"{A}[2-9]0{_ci('s')}",
        f"{A}{_ci('til')}{_ci('l')}?",
        f"{L}{L}*[aeiouyAEIOUY]{AE}[aeiouA-Z]{L}*",
        f"{A}{_ci('cause')}",
        _ci("cont'd") + "\\.?",
        _ci("nor'easter"), _ci("c'mon"), _ci("e'er"), _ci("s'mores"), _ci("ev'ry"), _ci("li'l"), _ci("nat'l"),
        _ci("O") + AE + _ci("o"),
    ]) + ")")
    m["APOWORD2"] = f"(?:{_ci('y')}{A})"
    m["FULLURL"] = (_ci("http") + _ci("s") + "?" + r":\/\/[^ \t\n\f\r\"<>|(){}]+[^ \t\n\f\r\"<>|.!?(){},\-]")
    m["LIKELYURL"] = (
        "(?:(?:" + _ci("www") + r"\.(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4})|"
        r"(?:(?:[^ \t\n\f\r\"`'<>|.!?(){},-_$]+\.)+" + _alt("com", "net", "org", "edu") + "))"
        r"(?:\/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},\-])?")
    m["EMAIL"] = (r"(?:(?:&[lL][tT];|<)?[a-zA-Z0-9][^ \t\n\f\r\"<>|()\xa0{}]*@(?:[^ \t\n\f\r\"<>|(){}.\xa0]+\.)*"
                  r"(?:[^ \t\n\f\r\"<>|(){}.\xa0]+)(?:&[gG][tT];|>)?)")
    exts = ["bat", "bmp", "c", "class", "cgi", "cpp", "dll", "doc", "docx", "exe", "gif", "gz", "h", "htm",
            "html", "jar", "java", "jpeg", "jpg", "mov", "mp3", "pdf", "php", "pl", "png", "ppt", "ps", "py",
            "sql", "tar", "txt", "wav", "x", "xml", "zip"]
    LLD = f"(?:{LETTER}|{D})"
    m["FILENAME"] = f"(?:{LLD}+(?:\\.{LLD}+)*\\.{_alt(*exts)})"
    m["PROGLANG"] = "(?:" + _ci("c++") + "|" + _ci("c#") + "|" + _ci("f#") + ")"
    m["TWITTER"] = f"(?:@[a-zA-Z_][a-zA-Z_0-9]*|#{LETTER}+)"
    m["SMILEY"] = r"(?:[<>]?[:;=][\-o\*']?[()DPdpO\\{@|\[\]])"
    m["ASIANSMILEY"] = (r"(?:[\^x=~<>]\.\[\^[xX]=~<>\]|[\-\^x=~<>']_[\-\^x=~<>']|"
                        r"\([\-\^x=~<>'][_.]?[\-\^x=~<>']\)|\^_\^)")
    m["ABMONTH"] = _alt("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec")
    m["ABDAYS"] = _alt("Mon", "Tue", "Tues", "Wed", "Thu", "Thurs", "Fri")
    m["ABSTATE"] = ("(?:" + "|".join([
        _ci("Ala"), _ci("Ariz"), "A" + _ci("rk"), _ci("Calif"), _ci("Colo"), _ci("Conn"), _ci("Dak"),
        "D" + _ci("el"), _ci("Fla"), _ci("Ga"), "I" + _ci("ll"), _ci("Ind"), _ci("Kan") + _ci("s") + "?",
        _ci("Ky"), "L" + _ci("a"), "M" + _ci("ass"), _ci("Md"), _ci("Mich"), _ci("Minn"), "M" + _ci("iss"),
        _ci("Mo"), _ci("Mont"), _ci("Neb"), _ci("Nev"), _ci("Okla"), "O" + _ci("re"), "P" + _ci("a"),
        _ci("Penn"), _ci("Tenn"), "T" + _ci("ex"), _ci("Va"), _ci("Vt"), "W" + _ci("ash"),
        _ci("Wisc") + "?", _ci("Wis"), _ci("Wyo")]) + ")")
    m["ABTITLE"] = ("(?:" + "|".join([
        _ci("Mr"), _ci("Mrs"), _ci("Ms"), "M" + _ci("iss"), _ci("Dr") + _ci("s") + "?",
        _ci("Prof") + _ci("s") + "?", _ci("Sen") + _ci("s") + "?", _ci("Rep") + _ci("s") + "?",
        _ci("Atty") + _ci("s") + "?", _ci("Lt"), _ci("Col"), _ci("Gen"), _ci("Messrs"),
        _ci("Gov") + _ci("s") + "?", _ci("Adm"), _ci("Rev"), _ci("Maj"), _ci("Sgt"), _ci("Cpl"),
        _ci("Pvt"), _ci("Mt"), _ci("Capt"), _ci("St") + _ci("e") + "?", _ci("Ave"), _ci("Pres"),
        _ci("Lieut"), _ci("Hon"), _ci("Brig"), _ci("C") + _ci("o") + "?" + _ci("mdr"), _ci("Pfc"),
        _ci("Spc"), _ci("Supt") + _ci("s") + "?", _ci("Det"), _ci("Msgr"), _ci("Assoc"), _ci("Asst"),
        _ci("Adj"), _ci("Ens"), _ci("Insp"), _ci("Mme"), _ci("Mlle")]) + ")")
    m["ABPTIT"] = "(?:" + "|".join([_ci("Jr"), _ci("Sr"), _ci("Bros"), "(?:" + _ci("Ed") + "|" + _ci("Ph") + ")\\." + _ci("D"),
                                     _ci("Blvd"), _ci("Rd"), _ci("Rt"), _ci("Ct"), _ci("Esq")]) + ")"
    m["ABCOMP"] = ("(?:" + "|".join([_ci("Inc"), _ci("Co") + _ci("s") + "?", _ci("Corp"),
                                      _ci("P") + _ci("p") + "?" + _ci("t") + "[ye]" + _ci("s") + "?", _ci("Ltd"),
                                      _ci("Plc"), _ci("Bancorp"), _ci("Bldg"), _ci("Bhd"), _ci("Assn"),
                                      _ci("Univ"), _ci("Intl"), _ci("Sys")]) + ")")
    m["ABCOMP2"] = "(?:" + "|".join([_ci("Invt"), _ci("Elec"), _ci("Natl"), _ci("M") + "[ft]" + _ci("g")]) + ")"
    m["ABNUM"] = _alt("tel", "est", "ext", "sq")
    m["ABBREV3"] = "(?:" + _alt("ca", "fig", "figs", "prop", "no", "nos", "art", "bldg", "pp", "op") + "\\.)"
    m["ABBREV1"] = (f"(?:(?:{m['ABMONTH']}|{m['ABDAYS']}|{m['ABSTATE']}|{m['ABCOMP']}|{m['ABNUM']}|"
                    f"{m['ABPTIT']}|{_alt('etc', 'al', 'seq')})\\.)")
    m["ABBREV4"] = ("(?:[A-Za-z]|" + m["ABTITLE"] + "|" + _alt("vs", "Alex", "Wm", "Jos", "Cie", "ft", "Ph", "Dept") + "|"
                    + _ci("a.k.a") + "|" + _alt("cf", "TREAS") + "|" + m["ACRO"] + "|" + m["ABCOMP2"] + ")")
    m["ABBREV2"] = f"(?:{m['ABBREV4']}\\.)"
    m["ACRONYM"] = f"(?:{m['ACRO']}\\.)"
    # before a sentence-starting word a lone initial also counts ("I. The" -> "I" + ".")
    m["ACRONYM1"] = f"(?:(?:[A-Za-z]|{m['ACRO']})\\.)"
    followers = ["About", "According", "Additionally", "After", "An", "A", "As", "At", "But", "Earlier",
                 "He", "Her", "Here", "However", "If", "In", "It", "Last", "Many", "More", "Mr.", "Ms.",
                 "Now", "Once", "One", "Other", "Our", "She", "Since", "So", "Some", "Such", "That",
                 "The", "Then", "There", "These", "They", "This", "We", "When", "While", "What", "Yet",
                 "You"]
    # "[A]bout": the first letter is a character class (case-sensitive), the rest is caseless
    m["ACRONYM_FOLLOWERS"] = "(?:" + "|".join(f[0] + _ci(f[1:]) for f in followers) + ")"
    m["PHONE"] = (r"(?:(?:\([0-9]{2,3}\)[ \xa0]?|(?:\+\+?)?(?:[0-9]{2,4}[\- \xa0])?[0-9]{2,4}[\- \xa0])"
                  r"[0-9]{3,4}[\- \xa0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}\.[0-9]{3,4}\.[0-9]{3,5})")
    m["FAKEDUCKFEET"] = "(?:<<|>>)"
    m["LESSTHAN"] = "(?:<|" + _ci("&lt;") + ")"
    m["GREATERTHAN"] = "(?:>|" + _ci("&gt;") + ")"
    m["HYPHENS"] = r"\-+"
    m["LDOTS"] = r"(?:\.{3,5}|(?:\.[ \xa0]){2,4}\.|[\x85\u2026])"
    m["ATS"] = "@+"
    m["UNDS"] = "_+"
    m["ASTS"] = r"(?:\*+|(?:\\\*){1,3})"
    m["HASHES"] = "#+"
    m["FNMARKS"] = f"(?:{m['ATS']}|{m['HASHES']}|{m['UNDS']})"
    m["INSENTP"] = r"[,;:\u3001]"
    m["QUOTES"] = (f"(?:{m['APOS']}|''|[`\\u2018\\u2019\\u201a\\u201b\\u201c\\u201d\\x91\\x92\\x93\\x94"
                   "\\u201e\\u201f\\u2039\\u203a\\xab\\xbb]{1,2})")
    m["DBLQUOT"] = '(?:"|' + _ci("&quot;") + ")"
    m["TBSPEC"] = ("(?:-" + _alt("RRB", "LRB", "RCB", "LCB", "RSB", "LSB") + "-|" + _ci("C.D.s") + "|"
                   + _ci("pro-") + "|" + _ci("anti-") + "|" + _ci("S") + "(?:&|" + _ci("&amp;") + ")" + _ci("P-500")
                   + "|" + _ci("S") + "(?:&|" + _ci("&amp;") + ")" + _ci("Ls") + "|" + _ci("Cap") + A + _ci("n")
                   + "|" + _ci("c") + A + _ci("est") + ")")
    m["TBSPEC2"] = f"(?:{A}[0-9][0-9])"
    m["MISCSYMBOL"] = (
        "[+%&~\\^|\\\\\\xa6\\xa7\\xa8\\xa9\\xac\\xae\\xaf\\xb0-\\xb3\\xb4-\\xba\\xd7\\xf7\\u0387\\u05be\\u05c0"
        "\\u05c3\\u05c6\\u05f3\\u05f4\\u0600-\\u0603\\u0606-\\u060a\\u060c\\u0614\\u061b\\u061e\\u066a"
        "\\u066d\\u0703-\\u070d\\u07f6\\u07f7\\u07f8\\u0964\\u0965\\u0e4f\\u1fbd\\u2016\\u2017\\u2020-\\u2023"
        "\\u2030-\\u2038\\u203b\\u203e-\\u2042\\u2044\\u207a-\\u207f\\u208a-\\u208e\\u2100-\\u214f"
        "\\u2190-\\u21ff\\u2200-\\u2bff\\u3012\\u30fb\\uff01-\\uff0f\\uff1a-\\uff20\\uff3b-\\uff40"
        "\\uff5b-\\uff65]")
    m["ASSIMILATIONS3"] = _alt("cannot", "gimme", "gonna", "gotta", "lemme", "wanna")
    m["ASSIMILATIONS2"] = "(?:'" + _alt("tis", "twas") + ")"
    return m


# ----------------------------------------------------------------------------------------------
# Token rewriting helpers (the Java actions)
# ----------------------------------------------------------------------------------------------

_AMP = regex.compile(r"(?i:&amp;)")
_SINGLE_QUOTE = regex.compile(r"&apos;|'")
_DOUBLE_QUOTE = regex.compile(r'"|&quot;')
_LEFT_SINGLE = regex.compile("[\x91\u2018\u201b\u2039]")
_RIGHT_SINGLE = regex.compile("[\x92\u2019\u203a]")
_LEFT_DOUBLE = regex.compile("[\x93\u201c\xab]")
_RIGHT_DOUBLE = regex.compile("[\x94\u201d\xbb]")


def _latex_quotes(tok: str, probably_left: bool) -> str:
    if probably_left:
        tok = _SINGLE_QUOTE.sub("`", tok)
        tok = _DOUBLE_QUOTE.sub("``", tok)
    else:
        tok = _SINGLE_QUOTE.sub("'", tok)
        tok = _DOUBLE_QUOTE.sub("''", tok)
    tok = _LEFT_SINGLE.sub("`", tok)
    tok = _RIGHT_SINGLE.sub("'", tok)
    tok = _LEFT_DOUBLE.sub("``", tok)
    return _RIGHT_DOUBLE.sub("''", tok)


def _soft(tok: str) -> str:
    # a token made only of soft hyphens becomes a hyphen rather than vanishing
    return tok.replace("\xad", "") or "-"


def _nbsp(tok: str) -> str:
    return tok.replace(" ", "\xa0")


_FRACTIONS = {"\xbc": "1/4", "\xbd": "1/2", "\xbe": "3/4", "\u2153": "1/3", "\u2154": "2/3"}
_CURRENCY = str.maketrans({"\xa2": "cents", "\xa3": "#", "\x80": "$", "\xa4": "$", "\u20a0": "$", "\u20ac": "$"})

# An action maps the matched body text to (token or None, characters to push back).
Action = Callable[[str], "tuple[str | None, int]"]


def _keep(t: str):
    return t, 0


def _drop(t: str):
    return None, 0


def _const(value: str) -> Action:
    return lambda t: (value, 0)


def _sentence_final_abbrev(t: str):
    # the token keeps its period and the period is also returned as the next token
    return t, 1


def _acronym_before_sentence(t: str):
    # JFlex 1.4 sometimes reports trailing spaces inside the token; the Java action strips them
    stripped = t.rstrip(" \t\n\x0b\x0c\r\x85")
    extra = len(t) - len(stripped)
    if len(stripped) == 2:  # "I." -> "I", then "."
        return stripped[:1], 1 + extra
    return stripped, 1 + extra


def _hyphens(t: str):
    return ("--" if 3 <= len(t) <= 4 else t), 0


def _assimilation(keep: int) -> Action:
    return lambda t: (t[:keep], len(t) - keep)


def _phone(t: str):
    return _nbsp(t).replace("(", "-LRB-").replace(")", "-RRB-"), 0


# (name, body, trailing context or None, action) in the order of the JFlex specification:
# the order only matters for equal-length matches.
def _rule_table() -> list[tuple[str, str, str | None, Action]]:
    m = _macros()
    return [
        ("ASSIMILATIONS3", m["ASSIMILATIONS3"], None, _assimilation(3)),
        ("ASSIMILATIONS2", m["ASSIMILATIONS2"], None, _assimilation(2)),
        ("SGML", m["SGML"], None, lambda t: (_nbsp(t), 0)),
        ("SPMDASH", m["SPMDASH"], None, _const("--")),
        ("SPAMP", m["SPAMP"], None, lambda t: (_AMP.sub("&", t), 0)),
        ("SPPUNC", m["SPPUNC"], None, _keep),
        ("WORD/REDAUX", m["WORD"], m["REDAUX"], lambda t: (_soft(t), 0)),
        ("SWORD/SREDAUX", m["SWORD"], m["SREDAUX"], lambda t: (_soft(t), 0)),
        ("WORD", m["WORD"], None, lambda t: (_soft(t), 0)),
        ("APOWORD", m["APOWORD"], None, _keep),
        ("APOWORD2", m["APOWORD2"], f"[{_classes()['LETTER_CLASS']}]", _keep),
        ("FULLURL", m["FULLURL"], None, _keep),
        ("LIKELYURL", m["LIKELYURL"], None, _keep),
        ("EMAIL", m["EMAIL"], None, _keep),
        ("PROGLANG", m["PROGLANG"], None, _keep),
        ("TWITTER", m["TWITTER"], None, _keep),
        ("REDAUX/", m["REDAUX"], "[^A-Za-z]", lambda t: (_latex_quotes(t, False), 0)),
        ("SREDAUX", m["SREDAUX"], None, lambda t: (_latex_quotes(t, False), 0)),
        ("DATE", m["DATE"], None, _keep),
        ("NUMBER", m["NUMBER"], None, lambda t: (_soft(t), 0)),
        ("SUBSUPNUM", m["SUBSUPNUM"], None, _keep),
        ("FRAC", m["FRAC"], None, lambda t: (_nbsp(t), 0)),
        ("FRAC2", m["FRAC2"], None, lambda t: ("".join(_FRACTIONS.get(ch, ch) for ch in t), 0)),
        ("TBSPEC", m["TBSPEC"], None, lambda t: (_AMP.sub("&", t), 0)),
        ("THING3", m["THING3"], None, _keep),
        ("DOLSIGN", m["DOLSIGN"], None, _keep),
        ("DOLSIGN2", m["DOLSIGN2"], None, lambda t: (t.translate(_CURRENCY), 0)),
        ("ACRONYM/FOLLOWER", m["ACRONYM1"], f"{m['SPACENLS']}(?:{m['ACRONYM_FOLLOWERS']}|{m['SGML']}){m['SPACENL']}",
         _acronym_before_sentence),
        ("ABBREV1/SENTEND", m["ABBREV1"], m["SENTEND"], _sentence_final_abbrev),
        ("ABBREV1/ANY2", m["ABBREV1"], r"[\s\S][\s\S]", _keep),
        ("ABBREV1", m["ABBREV1"], None, _sentence_final_abbrev),
        ("ABBREV3/DIGIT", m["ABBREV3"], f"{m['SPACENL']}?{m['DIGIT']}", _keep),
        ("ABBREV2", m["ABBREV2"], None, _keep),
        ("ABBREV4/SPACE", m["ABBREV4"], m["SPACE"], _keep),
        ("ACRO/SPACENL", m["ACRO"], m["SPACENL"], _keep),
        ("TBSPEC2/SPACENL", m["TBSPEC2"], m["SPACENL"], _keep),
        ("WORD./INSENTP", m["WORD"] + r"\.", m["INSENTP"], lambda t: (_soft(t), 0)),
        ("FILENAME", m["FILENAME"], f"(?:{m['SPACENL']}|[.?!,])", _keep),
        ("PHONE", m["PHONE"], None, _phone),
        ("SMILEY", m["SMILEY"], "[^A-Za-z0-9]", lambda t: (t.replace("(", "-LRB-").replace(")", "-RRB-"), 0)),
        ("ASIANSMILEY", m["ASIANSMILEY"], None, lambda t: (t.replace("(", "-LRB-").replace(")", "-RRB-"), 0)),
        ("DBLQUOT/ALNUM", m["DBLQUOT"], "[A-Za-z0-9$]", lambda t: (_latex_quotes(t, True), 0)),
        ("DBLQUOT", m["DBLQUOT"], None, lambda t: (_latex_quotes(t, False), 0)),
        ("DEL", "\x7f", None, _drop),
        ("LESSTHAN", m["LESSTHAN"], None, _const("<")),
        ("GREATERTHAN", m["GREATERTHAN"], None, _const(">")),
        ("LSB", r"\[", None, _const("-LSB-")),
        ("RSB", r"\]", None, _const("-RSB-")),
        ("LCB", r"\{", None, _const("-LCB-")),
        ("RCB", r"\}", None, _const("-RCB-")),
        ("LRB", r"\(", None, _const("-LRB-")),
        ("RRB", r"\)", None, _const("-RRB-")),
        ("HYPHENS", m["HYPHENS"], None, _hyphens),
        ("LDOTS", m["LDOTS"], None, _const("...")),
        ("FNMARKS", m["FNMARKS"], None, _keep),
        ("ASTS", m["ASTS"], None, _keep),
        ("INSENTP", m["INSENTP"], None, _keep),
        ("QMARKS", "[?!]+", None, _keep),
        ("PERIODS", "[.\xa1\xbf\u037e\u0589\u061f\u06d4\u0700-\u0702\u07fa\u3002]", None, _keep),
        ("EQUALS", "=", None, _keep),
        ("SLASH", r"\/", None, _keep),
        ("HTHING./INSENTP", m["HTHING"] + r"\.", m["INSENTP"], lambda t: (_soft(t), 0)),
        ("HTHING", m["HTHING"], None, lambda t: (_soft(t), 0)),
        ("THING./INSENTP", m["THING"] + r"\.", m["INSENTP"], _keep),
        ("THING", m["THING"], None, _keep),
        ("THINGA./INSENTP", m["THINGA"] + r"\.", m["INSENTP"], lambda t: (_AMP.sub("&", t), 0)),
        ("THINGA", m["THINGA"], None, lambda t: (_AMP.sub("&", t), 0)),
        ("QUOTE/LETTER", "'", "[A-Za-z][^ \t\n\r\xa0]", lambda t: (_latex_quotes(t, True), 0)),
        ("REDAUX", m["REDAUX"], None, lambda t: (_latex_quotes(t, False), 0)),
        ("QUOTES", m["QUOTES"], None, lambda t: (_latex_quotes(t, False), 0)),
        ("FAKEDUCKFEET", m["FAKEDUCKFEET"], None, _keep),
        ("MISCSYMBOL", m["MISCSYMBOL"], None, _keep),
        ("SPACES", r"(?:\x00|" + m["SPACES"] + r"|[\u200b\u200e\u200f\ufeff])", None, _drop),
        ("NEWLINE", m["NEWLINE"], None, _const("\n")),
        ("NBSP", _ci("&nbsp;"), None, _drop),
        ("UNTOKENIZABLE", r"[^\n]", None, _drop),
    ]


# Rules whose backtracking match is also the longest, so they need no POSIX matching (checked in the
# tests): greedy runs, and patterns where at most one match is possible at a position because each
# choice is forced by the next character (WORD./INSENTP and THING./INSENTP: the body ends at the
# first period followed by ",;:", which neither body can contain; TWITTER, APOWORD2: a fixed first
# character, then one run; DATE, FRAC: a digit run must end at a separator or a slash).
_GREEDY_IS_LONGEST = frozenset(["WORD", "THING", "NUMBER", "WORD/REDAUX", "SWORD/SREDAUX", "WORD./INSENTP",
                                "THING./INSENTP", "TWITTER", "APOWORD2", "DATE", "FRAC"])


class _Rule:
    __slots__ = ("name", "index", "source", "_parsed", "_prefilter", "_posix", "first", "action", "max_len",
                 "fixed", "required", "greedy_is_longest")

    def __init__(self, index: int, name: str, body: str, context: str | None, action: Action):
        self.name = name
        self.index = index
        src = f"(?P<b>{body})" + (f"(?:{context})" if context is not None else "")
        # a cheap backtracking match decides whether the rule applies at all; POSIX mode then
        # gives the leftmost-longest match, like the scanner's DFA
        self.source = src
        self._prefilter = self._posix = None  # compiled on first use: many rules never run
        self._parsed = parsed = sre_parse.parse(src)
        self.first = _first_chars(parsed)
        lo, hi = parsed.getwidth()
        self.max_len = hi  # a later rule no longer than the best match so far cannot win
        self.fixed = lo == hi  # one possible length: the backtracking match is the longest one
        # patterns where every character forces the next step, so the backtracking match is the
        # longest too (checked against POSIX matching in the tests)
        self.greedy_is_longest = self.fixed or name in _GREEDY_IS_LONGEST
        # a character every match contains ("." for abbreviations): a cheap test before the regex
        required = _required_chars(parsed)
        self.required = min(required) if required else None
        self.action = action

    @property
    def prefilter(self) -> re.Pattern:
        if self._prefilter is None:
            # (from the parse made above: parsing is a third of compiling these large classes)
            self._prefilter = sre_compile.compile(self._parsed)
            self._parsed = None
        return self._prefilter

    @property
    def pattern(self) -> regex.Pattern:
        if self._posix is None:
            self._posix = regex.compile("(?p)" + self.source)
        return self._posix


def _required_chars(seq) -> set[str]:
    """Characters that occur in every string the parsed regex matches."""
    out: set[str] = set()
    for op, av in seq:
        if op is sre_c.LITERAL:
            out.add(chr(av))
        elif op is sre_c.SUBPATTERN:
            out |= _required_chars(av[-1])
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) and av[0] >= 1:
            out |= _required_chars(av[2])
        elif op is sre_c.BRANCH:
            alts = [_required_chars(alt) for alt in av[1]]
            out |= set.intersection(*alts) if alts else set()
    return out


# -- which rules can start with a given character (parsed from the rule's regex) -----------------

def _first_chars(seq) -> list:
    tests: list = []
    for op, av in seq:
        found, nullable = _first_of(op, av)
        tests += found
        if not nullable:
            return tests
    return tests + [(sre_c.ANY, None)]  # a rule that can match "" could start anywhere


def _first_of(op, av) -> tuple[list, bool]:
    if op in (sre_c.LITERAL, sre_c.NOT_LITERAL, sre_c.IN, sre_c.ANY):
        return [(op, av)], False
    if op is sre_c.BRANCH:
        tests, nullable = [], False
        for alt in av[1]:
            found = _first_chars(alt)
            nullable |= bool(found) and found[-1] == (sre_c.ANY, None) and not alt
            tests += found
        return tests, nullable
    if op is sre_c.SUBPATTERN:
        found = _first_chars(av[-1])
        return found, False
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
        lo, _hi, sub = av
        return _first_chars(sub), lo == 0
    return [(sre_c.ANY, None)], True  # anything unexpected: assume it can start anywhere


_CATEGORY = {sre_c.CATEGORY_DIGIT: re.compile(r"\d"), sre_c.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
             sre_c.CATEGORY_SPACE: re.compile(r"\s"), sre_c.CATEGORY_NOT_SPACE: re.compile(r"\S"),
             sre_c.CATEGORY_WORD: re.compile(r"\w"), sre_c.CATEGORY_NOT_WORD: re.compile(r"\W")}


def _starts(tests: list, ch: str) -> bool:
    cp = ord(ch)
    for op, av in tests:
        if op is sre_c.ANY:
            return True
        if op is sre_c.LITERAL:
            if cp == av:
                return True
        elif op is sre_c.NOT_LITERAL:
            if cp != av:
                return True
        else:  # IN: a character class
            negate = hit = False
            for cop, cav in av:  # (NEGATE, if there, comes first)
                if cop is sre_c.NEGATE:
                    negate = True
                elif cop is sre_c.LITERAL:
                    hit = cp == cav
                elif cop is sre_c.RANGE:
                    hit = cav[0] <= cp <= cav[1]
                elif cop is sre_c.CATEGORY:
                    hit = bool(_CATEGORY[cav].match(ch))
                else:  # pragma: no cover - unknown class item: be conservative
                    hit = True
                if hit:
                    break
            if hit != negate:
                return True
    return False


@lru_cache(maxsize=None)
def _rules() -> tuple[_Rule, ...]:
    return tuple(_Rule(i, *r) for i, r in enumerate(_rule_table()))


_candidates_cache: dict[str, tuple[_Rule, ...]] = {}


def _candidates(ch: str) -> tuple[_Rule, ...]:
    """Rules that can match at a position starting with `ch`, in specification order."""
    found = _candidates_cache.get(ch)
    if found is None:
        found = _candidates_cache[ch] = tuple(r for r in _rules() if _starts(r.first, ch))
    return found


_NON_BMP = regex.compile("[\U00010000-\U0010ffff]")
_LONE_SURROGATE = regex.compile("[\ud800-\udfff]")


def _to_utf16_units(text: str) -> str:
    """Split characters above U+FFFF into surrogate pairs: the scanner counts UTF-16 units."""
    if not _NON_BMP.search(text):
        return text

    def pair(mt):
        cp = ord(mt.group()) - 0x10000
        return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))

    return _NON_BMP.sub(pair, text)


def _from_utf16_units(token: str) -> str:
    """Join surrogate pairs back; a half pair left in a token is written as "?" (Java's encoder)."""
    if not _LONE_SURROGATE.search(token):
        return token
    joined = token.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE_SURROGATE.sub("?", joined)


# a space or tab starts a run of the scanner's SPACE characters that nothing else can match
_BLANKS = re.compile(r"[ \t][ \t\xa0\u2000-\u200a\u3000]*")
# plain words, each followed by blanks (or by the line end), scanned in one go
_PLAIN_RUN = re.compile(r"(?:[A-Za-z][A-Za-z0-9]*(?:[ \t][ \t\xa0\u2000-\u200a\u3000]*|(?=\n)|\Z))+")
_ASSIMILATED = frozenset(["cannot", "gimme", "gonna", "gotta", "lemme", "wanna"])
_HAS_ASSIMILATION = re.compile(r"(?i)\b(?:cannot|gimme|gonna|gotta|lemme|wanna)\b")
# A plain word followed by something the full scan would split off in a fixed way, one pattern
# (first matching alternative wins; they exclude each other):
#   clw/clc  "dog's", "they're": {WORD}/{REDAUX}, then {REDAUX}/[^A-Za-z] (not at the very end, where
#            "'re" loses to the quote rule '/[A-Za-z][^ ...])
#   ntw/ntc  "isn't": {SWORD}/{SREDAUX}, then {SREDAUX}
#   hyp      "T-shirt", "black-and-white": one {HTHING}
#   pw(/pp)  a word before a character that no rule starting with a letter takes in (e-mail and URL
#            patterns exclude these too), or before one punctuation mark that ends the chunk ("dog.")
_WORD_SPECIAL = re.compile(
    r"(?P<clw>[A-Za-z][A-Za-z0-9]*)(?P<clc>'(?:[msdMSD]|[rR][eE]|[vV][eE]|[lL][lL]))(?=[ \t\n])"
    r"|(?P<ntw>[A-Za-z]*[A-MO-Za-mo-z])(?P<ntc>[nN]'[tT])(?=[ \t\n]|\Z)"
    r"|(?P<hyp>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)(?=[ \t\n]|\Z)"
    r"|(?P<pw>[A-Za-z][A-Za-z0-9]*)(?:(?=[()<>{}|\"])|(?P<pp>[,;:!?]|\.(?![ \t\xa0]*\.))(?=[ \t\n]|\Z))")
_ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@lru_cache(maxsize=None)
def _punctuation_shortcuts() -> dict[str, tuple[re.Pattern, str | None]]:
    """Common punctuation whose token is fixed unless the next characters could start a longer
    match (checked by each pattern's lookahead against the competing rules): char -> (pattern,
    token; None means the matched text itself)."""
    digit = f"(?:[{_classes()['DIGIT_CLASS']}]|[\\u07c0-\\u07c9])"
    smiley_second = r"[\-o*'()DPdpO\\{@|\[\]]"
    return {
        ",": (re.compile(f",(?!{digit})"), ","),                           # NUMBER ",5"
        ".": (re.compile(f"\\.(?!\\.|[ \\xa0]\\.|{digit})"), "."),            # LDOTS, NUMBER ".5"
        ";": (re.compile(f";(?!{smiley_second})"), ";"),                   # SMILEY ";)"
        ":": (re.compile(f":(?!{smiley_second}|{digit})"), ":"),           # SMILEY ":)", NUMBER ":30"
        "!": (re.compile(r"[?!]+"), None),
        "?": (re.compile(r"[?!]+"), None),
        "(": (re.compile(r"\((?![0-9\-^x=~<>'])"), "-LRB-"),              # PHONE "(555)", ASIANSMILEY "(^_^)"
        ")": (re.compile(r"\)"), "-RRB-"),
        '"': (re.compile('"(?![A-Za-z0-9$])'), "''"),                       # DBLQUOT/[A-Za-z0-9$] -> ``
        "'": (re.compile(r"'(?=[ \t\n]|\Z)"), "'"),                          # every other ' rule needs more
        "\u2026": (re.compile(r"\u2026(?=[ \t\n]|\Z)"), "..."),                # LIKELYURL could continue
        "-": (re.compile(r"-+(?=[ \t\n]|\Z)"), None),                          # HYPHENS; NUMBER, TBSPEC need more
    }


@lru_cache(maxsize=None)
def _digits_word() -> re.Pattern:
    """A run of ASCII digits (and letters after the first digit: "1990s") before one blank that is
    not followed by a digit (of any script: "5 \u0663/\u0664" is a fraction) or another space:
    NUMBER/THING; no fraction or phone number can continue it."""
    digit = f"[{_classes()['DIGIT_CLASS']}\\u07c0-\\u07c9]"
    return re.compile(f"[0-9][A-Za-z0-9]*(?=[ \\t](?![\\xa0 \\t]|{digit})|\\n|\\Z)")


_abbreviation_cache: dict[str, bool] = {}


@lru_cache(maxsize=None)
def _abbreviation_pattern() -> re.Pattern:
    m = _macros()
    return re.compile(f"(?:{m['ABBREV1']}|{m['ABBREV2']}|{m['ABBREV3']}|{m['ACRONYM1']})")


def _is_abbreviation(word_with_period: str) -> bool:
    """Whether "word." is one token or part of one (then the fast path must not split it)."""
    hit = _abbreviation_cache.get(word_with_period)
    if hit is None:
        hit = _abbreviation_pattern().fullmatch(word_with_period) is not None
        _abbreviation_cache[word_with_period] = hit
    return hit


def lex(text: str, end: int | None = None) -> list[str]:
    """Raw PTB tokens of `text[:end]` (before lower-casing and punctuation removal).

    `text` holds UTF-16 units (see `_to_utf16_units`); `text[end:]` is only read as trailing
    context, as the scanner sees the start of the next caption's line. A token "\\n" marks a line
    break."""
    out: list[str] = []
    n = len(text) if end is None else end
    _lex_range(text, 0, n, n, out)
    return out


def _lex_range(text: str, pos: int, n: int, stop: int, out: list[str], starts: list[int] | None = None) -> int:
    """Append the tokens the scanner reads from `pos` on to `out` until it has passed `stop` (it
    may run past it, never past the line end `n`); return where it stopped. With `starts`, also
    record every position where the scanner starts a match (token or not)."""
    _PUNCT = _punctuation_shortcuts()
    while pos < stop:
        # Fast paths, equivalent to the full scan (see the comments at the patterns): blanks, runs of
        # plain words, a plain word before punctuation. Assimilations ("gonna") take the full scan.
        if starts is not None:
            starts.append(pos)
        ch = text[pos]
        if ch == " " or ch == "\t":
            pos = _BLANKS.match(text, pos).end()
            continue
        shortcut = _PUNCT.get(ch)
        if shortcut is not None:
            mt = shortcut[0].match(text, pos)
            if mt is not None:
                tok = shortcut[1] or mt.group()
                if ch == "-" and 3 <= len(tok) <= 4:
                    tok = "--"  # the HYPHENS action
                out.append(tok)
                pos = mt.end()
                continue
        elif "0" <= ch <= "9":
            mt = _digits_word().match(text, pos)
            if mt is not None:
                out.append(mt.group())
                pos = mt.end()
                continue
        elif ch in _ASCII_LETTERS:
            mt = _PLAIN_RUN.match(text, pos)
            if mt is not None:
                # (a run stops at the caption's line break; the clamp is a safeguard for text[end:])
                run = mt.group() if mt.end() <= n else text[pos:n]
                if _HAS_ASSIMILATION.search(run) is None:
                    if starts is not None:
                        starts.extend(pos + b.start() for b in _BLANKS.finditer(run))
                        starts.extend(pos + w.start() for w in _ASCII_WORD.finditer(run))
                    out.extend(run.split())
                    pos += len(run)
                    continue
                for word in _ASCII_WORD.finditer(run):
                    if word.group().lower() in _ASSIMILATED:
                        break
                    if starts is not None:
                        starts.append(pos + word.start())
                    out.append(word.group())
                if word.start():
                    if starts is not None:
                        starts.extend(pos + b.start() for b in _BLANKS.finditer(run, 0, word.start()))
                    pos += word.start()  # the full scan takes the assimilation
                    continue
            else:
                mt = _WORD_SPECIAL.match(text, pos)
                if mt is not None:
                    kind = mt.lastgroup
                    if kind == "clc" or kind == "ntc":
                        first = mt.group(mt.re.groupindex[kind] - 1)
                        if first.lower() not in _ASSIMILATED:
                            out.append(first)
                            out.append(mt.group(kind))
                            if starts is not None:
                                starts.append(mt.start(kind))
                            pos = mt.end()
                            continue
                    elif kind == "hyp":
                        out.append(mt.group(kind))
                        pos = mt.end()
                        continue
                    else:
                        word = mt.group("pw")
                        punct = mt.group("pp")
                        if word.lower() not in _ASSIMILATED and (
                                punct is None or punct != "." or not _is_abbreviation(mt.group())):
                            out.append(word)
                            if punct is not None:
                                out.append(punct)
                                if starts is not None:
                                    starts.append(mt.start("pp"))
                            pos = mt.end()
                            continue
        # Full scan: every rule that can start here; the longest match wins, the earlier rule a tie.
        best_len = 0
        best_rule = None
        best_body = 0
        for rule in _candidates(ch):
            if rule.max_len <= best_len:
                continue
            if rule.required is not None and text.find(rule.required, pos, pos + rule.max_len) < 0:
                continue
            mt = rule.prefilter.match(text, pos)
            if mt is None:
                continue
            if not rule.greedy_is_longest:
                mt = rule.pattern.match(text, pos)
            total = mt.end() - pos
            if total > best_len:
                best_len, best_rule, best_body = total, rule, mt.end("b") - pos
        if best_rule is None:  # pragma: no cover - the last rule matches any character but "\n"
            pos += 1
            continue
        tok, pushback = best_rule.action(text[pos:pos + best_body])
        consumed = max(1, best_body - pushback)
        if tok is not None:
            out.append(tok)
        pos += consumed
    return pos


def _java_lower(text: str) -> str:
    """String.toLowerCase(Locale.ENGLISH): as str.lower() except for capital sigma, which Java makes
    final (\u03c2) only when no cased letter follows it within the same word (digits included)."""
    if "\u03a3" not in text:
        return text.lower()
    out = []
    for m in _WORDISH.finditer(text):
        run = m.group()
        if "\u03a3" not in run:
            out.append(run.lower())
            continue
        chars = []
        for i, ch in enumerate(run):
            if ch != "\u03a3":
                chars.append(ch.lower())
                continue
            before = any(c.lower() != c.upper() for c in run[:i])
            after = any(c.lower() != c.upper() for c in run[i + 1:])
            chars.append("\u03c2" if before and not after else "\u03c3")
        out.append("".join(chars))
    return "".join(out)


# a "word" for Java's final-sigma test (its word BreakIterator): letters, digits and marks, also
# joined by a period, apostrophe or colon between them; anything else is a boundary
# (ideographs and kana are words of their own)
_W = r"(?:(?![\p{Han}\p{Hiragana}\p{Katakana}])[\p{L}\p{N}\p{M}])"
_WORDISH = regex.compile(rf"{_W}+(?:[.:'\u2019]{_W}+)*|[\s\S]")


_NEEDS_CLEANING = re.compile("[\n\r\x0b\x0c\u2028\u2029\U00010000-\U0010ffff]")


def _clean(caption: str) -> str:
    if _NEEDS_CLEANING.search(caption) is None:
        return caption
    return _to_utf16_units(caption.replace("\n", " ").translate(_FOREIGN_LINE_BREAKS))


#: how far past the end of a caption the scanner may look (its longest trailing context is an
#: acronym, blank lines, a sentence-starting word and one more character)
_CONTEXT_CHARS = 64


def _following_text(lines: Sequence[str]) -> list[str]:
    """For each line, the text the scanner sees after it: "\\n" + the next lines, up to a bound."""
    out = [""] * len(lines)
    tail = ""
    for i in range(len(lines) - 1, -1, -1):
        out[i] = tail
        tail = "\n" + lines[i] + tail
        # blank runs (blank lines included) are trailing context too: keep them whole
        blank = len(tail) - len(tail.lstrip(" \t\n\xa0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                                            "\u2008\u2009\u200a\u3000\x0b\x0c\x85\u2028\u2029\r"))
        tail = tail[:blank + _CONTEXT_CHARS]
    return out


def ptb_tokenize(captions: Sequence[str]) -> list[str]:
    """Tokenise captions exactly as pycocoevalcap's PTBTokenizer does for the same list, in order.

    Each caption is read as one line followed by the next caption (the jar reads them from one
    file), lower-cased, and stripped of pycocoevalcap's punctuation tokens; the result is the
    space-joined token string pycocoevalcap passes to its scorers."""
    lines = [_clean(c) for c in captions]
    following = _following_text(lines)
    if sum(map(len, _memos.values())) + len(_pair_memo) > _MEMO_SIZE:
        _clear_memos()
    return [_tokenize_line(line, context) for line, context in zip(lines, following)]


def _tokenize_line_plain(line: str, context: str) -> str:
    """One line scanned as a whole, then pycocoevalcap's post-processing (the reference path)."""
    # (a caption holds no line break after _clean, so no "\n" token comes back)
    java_line = " ".join(lex(line + context, len(line)) if context else lex(line))
    if not java_line.isascii() and _LONE_SURROGATE.search(java_line):
        java_line = " ".join(_from_utf16_units(t) for t in java_line.split(" "))
    java_line = _java_lower(java_line)
    # pycocoevalcap's own post-processing, verbatim: rstrip, split on " ", drop punctuation
    return " ".join(w for w in java_line.rstrip().split(" ") if w not in PUNCTUATIONS)


# -- the same, one blank-separated chunk at a time, each distinct chunk scanned once -------------
#
# Captions repeat their words far more than their lines: the adversarial benchmark corpus has
# 454,000 chunks but 3,200 distinct ones. The scanner has no left context, so once it stands at the
# start of a chunk, the chunk's tokens depend only on the chunk and on what follows it. After a
# space or tab it always stands at the next chunk: only the blank-run rule (SPACES) can start at a
# blank, and it takes non-breaking and other spaces after it too. A chunk's tokens depend only on
# the kind of character that follows it (a blank, "\n" or the end of the text; space and tab are
# read alike by every rule that can end there) unless a match starting at one of the chunk's token
# starts can run across it. Only a few rules can: SGML tags with attributes, runs of blanks,
# abbreviations whose trailing context reads on ("U.S. The", "No. 5", "I. The"), and three whose
# match goes on only if the character after the blank is a digit or a period: phone numbers
# ("(555) 123-4567"), fractions ("3 1/2") and spaced ellipses (". . ."). At a line end only the
# abbreviations can (nothing else matches across "\n"). Such a chunk is scanned in place; that
# output is memoised with the next chunk when nothing can reach past it. The tests check all of
# this against the whole-line scan.

_MEMO_SIZE = 200_000
# per following character (" " for any blank, "\n", "" at the very end): chunk (after a blank) ->
# its output; or (output, characters after the blank that void it); or False (scan in place)
_memos: dict[str, dict] = {" ": {"": ""}, "\n": {"": ""}, "": {"": ""}}
# chunk + blanks + next chunk + following character -> (output of the first chunk scanned in
# place, how far the scan went past it: 0 or to the end of the next chunk)
_pair_memo: dict[str, tuple[str, int]] = {}
# characters of a blank run other than " " and "\t"
_RUN_BLANK_CHARS = "\xa0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u3000"
_RUN_BLANKS = frozenset(_RUN_BLANK_CHARS)
_SPACENL_CHARS = " \t\n\r\x0b\x0c\x85\u2028\u2029" + _RUN_BLANK_CHARS
# suffixes from which a crossing match may start (at a token start, fullmatch): always ...
_CROSSES = re.compile("<[^>]*|[\t\xa0\u2000-\u200a\u3000]+")
# ... or when a period follows the blank (LDOTS), or a digit (PHONE, FRAC; see _crosses_before_digit)
_CROSSES_BEFORE_PERIOD = re.compile(r"[.\xa0]*\.")


def _clear_memos() -> None:
    for memo in _memos.values():
        memo.clear()
        memo[""] = ""
    _pair_memo.clear()


@lru_cache(maxsize=None)
def _digits_and_period() -> frozenset[str]:
    """The scanner's digits (of every script) and the period."""
    chars = {"."}
    for item in _ptb_classes.DIGIT.split() + ["07C0-07C9"]:
        a, _, b = item.partition("-")
        chars.update(chr(c) for c in range(int(a, 16), int(b or a, 16) + 1))
    return frozenset(chars)


@lru_cache(maxsize=None)
def _crosses_before_digit() -> re.Pattern:
    """Chunk suffixes that a phone number ("(555) 123", "555 1234") or a fraction ("3 1/2")
    continues after a blank when a digit comes next."""
    digit = f"[{_classes()['DIGIT_CLASS']}\\u07c0-\\u07c9]"
    return re.compile(f"[0-9()+\\-\\xa0]*[0-9)]|{digit}{{1,4}}")


def _finish(tokens: list[str]) -> str | None:
    """pycocoevalcap's post-processing of some of a line's tokens, or None where it is not token by
    token (a token holding a space or ending in whitespace, which its rstrip/split would cut)."""
    words = []
    for t in tokens:
        if not t or " " in t or t[-1].isspace():
            return None
        if not t.isascii() and _LONE_SURROGATE.search(t):
            t = _from_utf16_units(t)
        t = _java_lower(t)
        if t not in PUNCTUATIONS:
            words.append(t)
    return " ".join(words)


def _chunk_entry(chunk: str, follower: str):
    """The memo entry of `chunk`, which follows a blank, when `follower` comes after it."""
    chunk = chunk.lstrip(_RUN_BLANK_CHARS)  # (the blank run before takes these)
    n = len(chunk)
    if not n:
        return ""
    tokens: list[str] = []
    starts: list[int] = []
    if _lex_range(chunk + follower, 0, n, n, tokens, starts) != n:
        return False
    output = _finish(tokens)
    if output is None:
        return False
    voids = False
    last = chunk[-1]
    if last in _RUN_BLANKS:
        return False  # the blank run goes on after the blank
    if last in ".)" or last.isdigit() or not last.isascii() or "<" in chunk:
        for p in starts:
            # an abbreviation, maybe with the start of its trailing context ("I.\x85" + "\nThe")
            abbreviation = chunk[p:].rstrip(_SPACENL_CHARS)
            if abbreviation[-1:] == "." and _is_abbreviation(abbreviation):
                return False
            if follower != " ":
                continue  # only abbreviations read across a line end
            if _CROSSES.fullmatch(chunk, p):
                return False
            if _crosses_before_digit().fullmatch(chunk, p) or _CROSSES_BEFORE_PERIOD.fullmatch(chunk, p):
                voids = True
    return (output, _digits_and_period()) if voids else output


def _tokenize_line(line: str, context: str) -> str:
    """`_tokenize_line_plain(line, context)`, assembled from per-chunk outputs where possible."""
    if line[:1] not in _RUN_BLANKS:
        # every chunk known and read on its own: a few C-level calls
        parts = (line.replace("\t", " ") if "\t" in line else line).split(" ")
        last = parts.pop()
        try:
            head = " ".join(map(_memos[" "].__getitem__, parts))
            tail = _memos[context[:1]][last]
            if tail.__class__ is str:
                return " ".join(filter(None, f"{head} {tail}".split(" ")))
        except (KeyError, TypeError):  # a chunk not seen yet (KeyError) or not alone (TypeError)
            pass
    return _tokenize_chunks(line, context)


def _can_pair(chunk: str, nxt: str) -> bool:
    """Whether the in-place scan of `chunk` is determined by itself, the blanks, the next chunk `nxt`
    and the character after it: no match starting in `chunk` can reach past them (see above). Only
    phone numbers and spaced ellipses cross more than one blank."""
    if "<" in chunk or "<" in nxt or chunk[-1] in _RUN_BLANKS or nxt[0] in _RUN_BLANKS or nxt[-1] in _RUN_BLANKS:
        return False
    last = chunk[-1]
    if (last == ")" or (last != "." and last in _digits_and_period())) and _crosses_before_digit().fullmatch(nxt):
        return False
    return not (last == "." and _CROSSES_BEFORE_PERIOD.fullmatch(nxt))


def _tokenize_chunks(line: str, context: str) -> str:
    """The general case of `_tokenize_line`: chunk by chunk, scanning in place where needed."""
    parts = (line.replace("\t", " ") if "\t" in line else line).split(" ")
    n = len(line)
    line_end = context[:1]
    frags = []
    pos = start = 0
    for i, part in enumerate(parts):
        end = start + len(part)
        if part and end > pos:
            pair_key = None
            # does the scanner stand at this chunk (only blanks lie between pos and start)?
            if pos <= start and (i or part[0] not in _RUN_BLANKS):
                follower = " " if end < n else line_end
                memo = _memos[follower]
                frag = memo.get(part)
                if frag is None:
                    frag = memo[part] = _chunk_entry(part, follower)
                if frag.__class__ is tuple:
                    frag = frag[0] if end + 1 >= n or line[end + 1] not in frag[1] else False
                if frag is not False:
                    if frag:
                        frags.append(frag)
                    pos, start = end, end + 1
                    continue
                if part[0] in _RUN_BLANKS:  # the blank run before takes these
                    start = end - len(part.lstrip(_RUN_BLANK_CHARS))
                    part = line[start:end]
                pos = start
                j = i + 1
                while j < len(parts) and not parts[j]:
                    j += 1
                if j < len(parts) and _can_pair(part, parts[j]):
                    e2 = end + j - i + len(parts[j])
                    pair_key = line[start:e2] + (line[e2] if e2 < n else line_end)
                    hit = _pair_memo.get(pair_key)
                    if hit is not None:
                        if hit[0]:
                            frags.append(hit[0])
                        pos, start = end + hit[1], end + 1
                        continue
            # scan in place until past this chunk
            tokens: list[str] = []
            pos = _lex_range(line + context, pos, n, end, tokens)
            frag = _finish(tokens)
            if frag is None:
                return _tokenize_line_plain(line, context)
            if pair_key is not None and (pos == end or pos == e2):
                _pair_memo[pair_key] = (frag, pos - end)
            if frag:
                frags.append(frag)
        start = end + 1
    return " ".join(frags)
