"""The lexer specification of Stanford PTBTokenizer 3.4.1 (the jar coco-caption runs), as regexes.

JFlex macros (`macros()`) and the rules in specification order with their Java actions
(`rules()`), each with what the scanner in _ptb_core needs to try it cheaply: which characters
it can start with (`candidates(ch)`), its longest possible match, a character every match holds,
and whether a backtracking match is already the longest one (else POSIX leftmost-longest matching
is used, as the jar's DFA does). Character classes come from the jar's frozen tables
(_ptb_classes).
"""
from __future__ import annotations

import re
from functools import lru_cache
from re import _constants as sre_c, _parser as sre_parse
from typing import Callable

import regex

from vlgap.captions import _ptb_classes
from vlgap.captions._ptb_regex import SCAN_SPAN, _first_chars, _FirstChars, _possible_chars, _required_chars
from vlgap.captions._ptb_store import STORE


# Character classes: JFlex's [:letter:], [:digit:], [:uppercase:] as frozen in the jar's tables
# (see _ptb_classes). The scanner works on UTF-16 units, so code points above U+FFFF never match.

def _regex_class(ranges: str) -> str:
    """The inside of a regex class for the ranges, as the characters themselves: the regex parsers
    parse these large classes about twice as fast as \\u escapes."""
    def char(code: str) -> str:
        ch = chr(int(code, 16))
        return "\\" + ch if ch in "\\]^-[" else ch

    out = []
    for item in ranges.split():
        a, _, b = item.partition("-")
        out.append(char(a) + ("-" + char(b) if b else ""))
    return "".join(out)


@lru_cache(maxsize=None)
def classes() -> dict[str, str]:
    return {"LETTER_CLASS": _regex_class(_ptb_classes.LETTER),
            "DIGIT_CLASS": _regex_class(_ptb_classes.DIGIT),
            "UPPER_CLASS": _regex_class(_ptb_classes.UPPERCASE)}


# The rules repeat four large classes about a hundred times; sre's parser reads each occurrence
# character by character (most of the rules' parse time). `_parse` reads each class once: a rule is
# parsed with one private-use character standing for each class, which is then replaced by the
# class's items, as the parser would have built them (the tests compare the compiled patterns).
_PLACEHOLDERS = {"LETTER_CLASS": 0xE000, "DIGIT_CLASS": 0xE001, "UPPER_CLASS": 0xE002, "EXTRA_LETTERS": 0xE003}

# letters of the jar's LETTER macro beyond [:letter:] (marks, modifiers, ...)
_EXTRA_LETTERS = (
    r"\xad\u0237-\u024f\u02c2-\u02c5\u02d2-\u02df\u02e5-\u02ff\u0300-\u036f\u0370-\u037d\u0384\u0385"
    r"\u03cf\u03f6\u03fc-\u03ff\u0483-\u0487\u04cf\u04f6-\u04ff\u0510-\u0525\u055a-\u055f\u0591-\u05bd"
    r"\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0615-\u061a\u063b-\u063f\u064b-\u065e\u0670\u06d6-\u06ef"
    r"\u06fa-\u06ff\u070f\u0711\u0730-\u074f\u0750-\u077f\u07a6-\u07b1\u07ca-\u07f5\u07fa\u0900-\u0903"
    r"\u093c\u093e-\u094e\u0951-\u0955\u0962-\u0963\u0981-\u0983\u09bc-\u09c4\u09c7\u09c8\u09cb-\u09cd"
    r"\u09d7\u09e2\u09e3\u0a01-\u0a03\u0a3c\u0a3e-\u0a4f\u0a81-\u0a83\u0abc-\u0acf\u0b82\u0bbe-\u0bc2"
    r"\u0bc6-\u0bc8\u0bca-\u0bcd\u0c01-\u0c03\u0c3e-\u0c56\u0d3e-\u0d44\u0d46-\u0d48\u0e30-\u0e3a"
    r"\u0e47-\u0e4e\u0eb1-\u0ebc\u0ec8-\u0ecd")


def _large_classes() -> dict[str, str]:
    return {**classes(), "EXTRA_LETTERS": _EXTRA_LETTERS}


@lru_cache(maxsize=None)
def _class_items() -> dict[int, tuple]:
    c = _large_classes()
    return {code: tuple(sre_parse.parse(f"[{c[name]}]").data[0][1]) for name, code in _PLACEHOLDERS.items()}


def _parse(source: str) -> sre_parse.SubPattern:
    """sre_parse.parse(source), each large class read once (see above)."""
    c = _large_classes()
    for name, code in _PLACEHOLDERS.items():
        source = source.replace(f"[{c[name]}]", f"[{chr(code)}]")
    parsed = sre_parse.parse(source)
    _put_classes(parsed, _class_items())
    return parsed


def _put_classes(seq, items: dict[int, tuple]) -> None:
    for k, (op, av) in enumerate(seq):
        if op is sre_c.LITERAL and av in items:
            seq[k] = (sre_c.IN, list(items[av]))
        elif op is sre_c.IN and any(o is sre_c.LITERAL and a in items for o, a in av):
            out: list = []
            for o, a in av:
                out.extend(items[a] if o is sre_c.LITERAL and a in items else [(o, a)])
            seq[k] = (sre_c.IN, list(dict.fromkeys(out)))  # (sre_parse._uniq)
        elif op is sre_c.SUBPATTERN:
            _put_classes(av[-1], items)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
            _put_classes(av[2], items)
        elif op is sre_c.BRANCH:
            for alt in av[1]:
                _put_classes(alt, items)
        elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
            _put_classes(av[1], items)


# JFlex's %caseless also admits the characters Java maps onto a letter's case: dotted/dotless I,
# the long s and the Kelvin sign ("W\u0130s." is the abbreviation "Wis.").
_CASELESS_EXTRA = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


def ci(word: str) -> str:
    """A literal under JFlex %caseless: each letter matches both cases; classes stay as written."""
    out = []
    for ch in word:
        if ch.isalpha() and ch.lower() != ch.upper():
            out.append(f"[{ch.lower()}{ch.upper()}{_CASELESS_EXTRA.get(ch.lower(), '')}]")
        else:
            out.append(regex.escape(ch))
    return "".join(out)


def _alt(*words: str) -> str:
    return "(?:" + "|".join(ci(w) for w in words) + ")"


def macros() -> dict[str, str]:
    c = classes()
    m: dict[str, str] = {}
    L = f"[{c['LETTER_CLASS']}]"
    D = f"(?:[{c['DIGIT_CLASS']}]|[\\u07c0-\\u07c9])"
    m["SGML"] = (r"(?:<(?:[!?][A-Za-z\-][^>\r\n]*|[A-Za-z][A-Za-z0-9_:.\-]*(?:[ ]+(?:[A-Za-z][A-Za-z0-9_:.\-]*|"
                 r"[A-Za-z][A-Za-z0-9_:.\-]*[ ]*=[ ]*['\"][^\r\n'\"]*['\"]))*[ ]*\/?|\/[A-Za-z][A-Za-z0-9_:.\-]*)[ ]*>)")
    m["SPMDASH"] = "(?:&" + _alt("MD", "mdash", "ndash") + ";|[\\x96\\x97\\u2013\\u2014\\u2015])"
    m["SPAMP"] = ci("&amp;")
    m["SPPUNC"] = "(?:&(?:" + "|".join(ci(w) for w in ("HT", "TL", "UR", "LR", "QC", "QL", "QR", "odq", "cdq")) + "|#[0-9]+);)"
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
    LETTER = f"(?:{L}|{m['SPLET']}|[{_EXTRA_LETTERS}])"
    m["LETTER"] = LETTER
    m["WORD"] = f"(?:{LETTER}(?:{LETTER}|{D})*(?:[.!?]{LETTER}(?:{LETTER}|{D})*)*)"
    m["APOS"] = "(?:['\\x92\\u2019]|" + ci("&apos;") + ")"
    m["APOSETCETERA"] = f"(?:{m['APOS']}|[`\\x91\\u2018\\u201b])"
    LD = f"(?:{L}|{D})"
    m["HYPHEN"] = r"[\-_\u058a\u2010\u2011]"
    m["THING"] = (f"(?:(?:[dDoOlL]{m['APOSETCETERA']}{LD})?{LD}+"
                  f"(?:{m['HYPHEN']}(?:[dDoOlL]{m['APOSETCETERA']}{LD})?{LD}+)*)")
    m["THINGA"] = f"(?:[A-Z]+(?:(?:[+&]|{m['SPAMP']})[A-Z]+)+)"
    m["THING3"] = r"(?:[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?\/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2})"
    m["ACRO"] = ("(?:[A-Za-z](?:\\.[A-Za-z])+|" + _alt("Canada", "Sino", "Korean", "EU", "Japan", "non")
                 + "-" + ci("U.S") + "|" + ci("U.S.-") + "(?:" + ci("U.K") + "|" + ci("U.S.S.R") + "))")
    m["HTHING"] = f"(?:[A-Za-z0-9][A-Za-z0-9.,\\xad]*(?:-(?:[A-Za-z0-9\\xad]+|{m['ACRO']}\\.))+)"
    m["REDAUX"] = f"(?:{m['APOS']}(?:[msdMSD]|{_alt('re', 've', 'll')}))"
    m["SWORD"] = r"(?:[A-Za-z\xad]*[A-MO-Za-mo-z]\xad*)"
    m["SREDAUX"] = f"(?:{ci('n')}{m['APOSETCETERA']}{ci('t')})"
    A, AE = m["APOS"], m["APOSETCETERA"]
    m["APOWORD"] = ("(?:" + "|".join([
        f"{A}{ci('n')}{A}?",
        f"[lLdDjJ]{A}",
        f"{ci('Dunkin')}{A}",
        f"{ci('somethin')}{A}",
        f"{ci('ol')}{A}",
        f"{A}{ci('em')}",
        f"[A-HJ-XZn]{AE}{L}{{2}}{L}*",
        f"{A}[2-9]0{ci('s')}",
        f"{A}{ci('til')}{ci('l')}?",
        f"{L}{L}*[aeiouyAEIOUY]{AE}[aeiouA-Z]{L}*",
        f"{A}{ci('cause')}",
        ci("cont'd") + "\\.?",
        ci("nor'easter"), ci("c'mon"), ci("e'er"), ci("s'mores"), ci("ev'ry"), ci("li'l"), ci("nat'l"),
        ci("O") + AE + ci("o"),
    ]) + ")")
    m["APOWORD2"] = f"(?:{ci('y')}{A})"
    m["FULLURL"] = (ci("http") + ci("s") + "?" + r":\/\/[^ \t\n\f\r\"<>|(){}]+[^ \t\n\f\r\"<>|.!?(){},\-]")
    m["LIKELYURL"] = (
        "(?:(?:" + ci("www") + r"\.(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4})|"
        r"(?:(?:[^ \t\n\f\r\"`'<>|.!?(){},-_$]+\.)+" + _alt("com", "net", "org", "edu") + "))"
        r"(?:\/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},\-])?")
    m["EMAIL"] = (r"(?:(?:&[lL][tT];|<)?[a-zA-Z0-9][^ \t\n\f\r\"<>|()\xa0{}]*@(?:[^ \t\n\f\r\"<>|(){}.\xa0]+\.)*"
                  r"(?:[^ \t\n\f\r\"<>|(){}.\xa0]+)(?:&[gG][tT];|>)?)")
    exts = ["bat", "bmp", "c", "class", "cgi", "cpp", "dll", "doc", "docx", "exe", "gif", "gz", "h", "htm",
            "html", "jar", "java", "jpeg", "jpg", "mov", "mp3", "pdf", "php", "pl", "png", "ppt", "ps", "py",
            "sql", "tar", "txt", "wav", "x", "xml", "zip"]
    LLD = f"(?:{LETTER}|{D})"
    m["FILENAME"] = f"(?:{LLD}+(?:\\.{LLD}+)*\\.{_alt(*exts)})"
    m["PROGLANG"] = "(?:" + ci("c++") + "|" + ci("c#") + "|" + ci("f#") + ")"
    m["TWITTER"] = f"(?:@[a-zA-Z_][a-zA-Z_0-9]*|#{LETTER}+)"
    m["SMILEY"] = r"(?:[<>]?[:;=][\-o\*']?[()DPdpO\\{@|\[\]])"
    m["ASIANSMILEY"] = (r"(?:[\^x=~<>]\.\[\^[xX]=~<>\]|[\-\^x=~<>']_[\-\^x=~<>']|"
                        r"\([\-\^x=~<>'][_.]?[\-\^x=~<>']\)|\^_\^)")
    m["ABMONTH"] = _alt("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec")
    m["ABDAYS"] = _alt("Mon", "Tue", "Tues", "Wed", "Thu", "Thurs", "Fri")
    m["ABSTATE"] = ("(?:" + "|".join([
        ci("Ala"), ci("Ariz"), "A" + ci("rk"), ci("Calif"), ci("Colo"), ci("Conn"), ci("Dak"),
        "D" + ci("el"), ci("Fla"), ci("Ga"), "I" + ci("ll"), ci("Ind"), ci("Kan") + ci("s") + "?",
        ci("Ky"), "L" + ci("a"), "M" + ci("ass"), ci("Md"), ci("Mich"), ci("Minn"), "M" + ci("iss"),
        ci("Mo"), ci("Mont"), ci("Neb"), ci("Nev"), ci("Okla"), "O" + ci("re"), "P" + ci("a"),
        ci("Penn"), ci("Tenn"), "T" + ci("ex"), ci("Va"), ci("Vt"), "W" + ci("ash"),
        ci("Wisc") + "?", ci("Wis"), ci("Wyo")]) + ")")
    m["ABTITLE"] = ("(?:" + "|".join([
        ci("Mr"), ci("Mrs"), ci("Ms"), "M" + ci("iss"), ci("Dr") + ci("s") + "?",
        ci("Prof") + ci("s") + "?", ci("Sen") + ci("s") + "?", ci("Rep") + ci("s") + "?",
        ci("Atty") + ci("s") + "?", ci("Lt"), ci("Col"), ci("Gen"), ci("Messrs"),
        ci("Gov") + ci("s") + "?", ci("Adm"), ci("Rev"), ci("Maj"), ci("Sgt"), ci("Cpl"),
        ci("Pvt"), ci("Mt"), ci("Capt"), ci("St") + ci("e") + "?", ci("Ave"), ci("Pres"),
        ci("Lieut"), ci("Hon"), ci("Brig"), ci("C") + ci("o") + "?" + ci("mdr"), ci("Pfc"),
        ci("Spc"), ci("Supt") + ci("s") + "?", ci("Det"), ci("Msgr"), ci("Assoc"), ci("Asst"),
        ci("Adj"), ci("Ens"), ci("Insp"), ci("Mme"), ci("Mlle")]) + ")")
    m["ABPTIT"] = "(?:" + "|".join([ci("Jr"), ci("Sr"), ci("Bros"), "(?:" + ci("Ed") + "|" + ci("Ph") + ")\\." + ci("D"),
                                     ci("Blvd"), ci("Rd"), ci("Rt"), ci("Ct"), ci("Esq")]) + ")"
    m["ABCOMP"] = ("(?:" + "|".join([ci("Inc"), ci("Co") + ci("s") + "?", ci("Corp"),
                                      ci("P") + ci("p") + "?" + ci("t") + "[ye]" + ci("s") + "?", ci("Ltd"),
                                      ci("Plc"), ci("Bancorp"), ci("Bldg"), ci("Bhd"), ci("Assn"),
                                      ci("Univ"), ci("Intl"), ci("Sys")]) + ")")
    m["ABCOMP2"] = "(?:" + "|".join([ci("Invt"), ci("Elec"), ci("Natl"), ci("M") + "[ft]" + ci("g")]) + ")"
    m["ABNUM"] = _alt("tel", "est", "ext", "sq")
    m["ABBREV3"] = "(?:" + _alt("ca", "fig", "figs", "prop", "no", "nos", "art", "bldg", "pp", "op") + "\\.)"
    m["ABBREV1"] = (f"(?:(?:{m['ABMONTH']}|{m['ABDAYS']}|{m['ABSTATE']}|{m['ABCOMP']}|{m['ABNUM']}|"
                    f"{m['ABPTIT']}|{_alt('etc', 'al', 'seq')})\\.)")
    m["ABBREV4"] = ("(?:[A-Za-z]|" + m["ABTITLE"] + "|" + _alt("vs", "Alex", "Wm", "Jos", "Cie", "ft", "Ph", "Dept") + "|"
                    + ci("a.k.a") + "|" + _alt("cf", "TREAS") + "|" + m["ACRO"] + "|" + m["ABCOMP2"] + ")")
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
    m["ACRONYM_FOLLOWERS"] = "(?:" + "|".join(f[0] + ci(f[1:]) for f in followers) + ")"
    m["PHONE"] = (r"(?:(?:\([0-9]{2,3}\)[ \xa0]?|(?:\+\+?)?(?:[0-9]{2,4}[\- \xa0])?[0-9]{2,4}[\- \xa0])"
                  r"[0-9]{3,4}[\- \xa0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}\.[0-9]{3,4}\.[0-9]{3,5})")
    m["FAKEDUCKFEET"] = "(?:<<|>>)"
    m["LESSTHAN"] = "(?:<|" + ci("&lt;") + ")"
    m["GREATERTHAN"] = "(?:>|" + ci("&gt;") + ")"
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
    m["DBLQUOT"] = '(?:"|' + ci("&quot;") + ")"
    m["TBSPEC"] = ("(?:-" + _alt("RRB", "LRB", "RCB", "LCB", "RSB", "LSB") + "-|" + ci("C.D.s") + "|"
                   + ci("pro-") + "|" + ci("anti-") + "|" + ci("S") + "(?:&|" + ci("&amp;") + ")" + ci("P-500")
                   + "|" + ci("S") + "(?:&|" + ci("&amp;") + ")" + ci("Ls") + "|" + ci("Cap") + A + ci("n")
                   + "|" + ci("c") + A + ci("est") + ")")
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
def rule_table() -> list[tuple[str, str, str | None, Action]]:
    m = macros()
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
        ("APOWORD2", m["APOWORD2"], f"[{classes()['LETTER_CLASS']}]", _keep),
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
        ("NBSP", ci("&nbsp;"), None, _drop),
        ("UNTOKENIZABLE", r"[^\n]", None, _drop),
    ]


# Rules whose backtracking match is also the longest, so they need no POSIX matching (checked in the
# tests): greedy runs, and patterns where at most one match is possible at a position because each
# choice is forced by the next character (WORD./INSENTP and THING./INSENTP: the body ends at the
# first period followed by ",;:", which neither body can contain; TWITTER, APOWORD2: a fixed first
# character, then one run; DATE, FRAC: a digit run must end at a separator or a slash).
GREEDY_IS_LONGEST = frozenset(["WORD", "THING", "NUMBER", "WORD/REDAUX", "SWORD/SREDAUX", "WORD./INSENTP",
                                "THING./INSENTP", "TWITTER", "APOWORD2", "DATE", "FRAC"])


class Rule:
    __slots__ = ("name", "index", "source", "_parsed", "_prefilter", "_posix", "first", "action", "max_len",
                 "fixed", "required", "greedy_is_longest", "_run", "scans")

    def __init__(self, index: int, name: str, body: str, context: str | None, action: Action):
        self.name = name
        self.index = index
        # a cheap backtracking match decides whether the rule applies at all; POSIX mode then
        # gives the leftmost-longest match, like the scanner's DFA
        self.source = src = f"(?P<b>{body})" + (f"(?:{context})" if context is not None else "")
        self._parsed = self._prefilter = self._posix = self._run = None  # made on first use: many rules never run
        # (the analysis and the compiled patterns are kept between processes by _ptb_store)
        self.first, self.max_len, self.fixed, self.required, fixed_context = STORE.analysis(
            src, lambda: _analyse(self.parsed, context is not None))
        # patterns where every character forces the next step, so the backtracking match is the
        # longest too (checked against POSIX matching in the tests)
        self.greedy_is_longest = self.fixed or name in GREEDY_IS_LONGEST
        # the longest match without POSIX mode (see `longest`): where the trailing context, if any,
        # has one width, so the body ends a fixed distance before the match does
        self.scans = not self.greedy_is_longest and fixed_context
        self.action = action

    @property
    def parsed(self) -> sre_parse.SubPattern:
        if self._parsed is None:
            self._parsed = _parse(self.source)
        return self._parsed

    @property
    def prefilter(self) -> re.Pattern:
        if self._prefilter is None:
            # (from the parse: parsing is a third of compiling these large classes)
            self._prefilter = STORE.compiled(self.source, lambda: self.parsed)
        return self._prefilter

    def _run_pattern(self) -> sre_parse.SubPattern:
        """Runs of the characters a match may hold (`_possible_chars`)."""
        state = self.parsed.state
        return sre_parse.SubPattern(state, [(sre_c.MAX_REPEAT, (0, sre_c.MAXREPEAT, sre_parse.SubPattern(
            state, [_possible_chars(self.parsed)])))])

    def longest(self, text: str, pos: int, greedy: re.Match):
        """The leftmost-longest match at `pos` (as `pattern.match`), given the backtracking match
        `greedy`: without the POSIX pattern (whose compilation costs more than many scans) where
        `scans`, by trying each longer end in turn, from the longest a match could reach (the
        characters a match may hold, `max_len`) down; a match with a fixed-width trailing context
        has one body end per end. Where more than `SCAN_SPAN` ends are possible, the POSIX pattern."""
        if not self.scans:
            return self.pattern.match(text, pos)
        run = self._run
        if run is None:
            run = self._run = STORE.compiled(self.source, self._run_pattern, kind="run")
        g = greedy.end()
        bound = min(run.match(text, pos).end(), pos + self.max_len)
        if bound - g > SCAN_SPAN:
            return self.pattern.match(text, pos)
        fullmatch = self.prefilter.fullmatch
        for end in range(bound, g, -1):
            mt = fullmatch(text, pos, end)
            if mt is not None:
                return mt
        return greedy

    @property
    def pattern(self) -> regex.Pattern:
        if self._posix is None:
            self._posix = STORE.posix(self.source)
        return self._posix


def _analyse(parsed: sre_parse.SubPattern, has_context: bool) -> tuple:
    """What the scanner needs to know of a rule's parsed source: the characters a match can start
    with, its longest possible match (a later rule no longer than the best match so far cannot win),
    whether it has one possible length (then the backtracking match is the longest one), a character
    every match contains ("." for abbreviations: a cheap test before the regex, or None), and whether
    its trailing context (the parse's second part), if any, has one width."""
    lo, hi = parsed.getwidth()
    required = _required_chars(parsed)
    lo_c, hi_c = sre_parse.SubPattern(parsed.state, parsed.data[1:]).getwidth() if has_context else (0, 0)
    return _FirstChars(_first_chars(parsed)), hi, lo == hi, (min(required) if required else None), lo_c == hi_c


@lru_cache(maxsize=None)
def rules() -> tuple[Rule, ...]:
    return tuple(Rule(i, *r) for i, r in enumerate(rule_table()))


_candidates_cache: dict[str, tuple[Rule, ...]] = {}


def candidates(ch: str) -> tuple[Rule, ...]:
    """Rules that can match at a position starting with `ch`, in specification order."""
    found = _candidates_cache.get(ch)
    if found is None:
        found = tuple(r for r in rules() if ch in r.first)
        for r in found:
            r.prefilter  # noqa: B018 (compiled now: the scanner reads r._prefilter)
        _candidates_cache[ch] = found
    return found
