/* The GPT-2 pre-tokenizer as a scanner over the UTF-8 bytes of a text (used by bpe_native.c and bpe_train.c).
 *
 * Pre-tokenizer: GPT2_PAT = '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ (openai/gpt-2
 * encoder.py), tried left to right at each position. Every code point falls in one class (letter, number, space,
 * other; unicode_classes.h is generated from ``regex`` itself), so each alternative is a run of one class:
 *   - an apostrophe followed by s, d, m, t, ll, ve or re is a contraction;
 *   - else an ASCII space followed by a letter, number or other code point starts a run of that class;
 *   - else a run of one class; a whitespace run of two or more that is followed by a non-space gives up its last
 *     code point (the look-ahead of \s+(?!\S)), which then starts the next pre-token.
 * The scanner walks the UTF-8 bytes of the text; CPython strings with lone surrogates cannot be encoded, so they
 * raise UnicodeEncodeError as the reference does.
 */
#ifndef LMW_PRETOKENIZER_H
#define LMW_PRETOKENIZER_H
#include <Python.h>
#include <stdint.h>

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };
#define N_CODE_POINTS 0x110000
extern uint8_t *lmw_char_class; /* code point -> class, filled once at import (bpe_native.c) */

/* Class of the code point at s[i] (valid UTF-8) and its length in bytes. */
static inline int class_at(const uint8_t *s, Py_ssize_t i, Py_ssize_t *len) {
    uint8_t b = s[i];
    uint32_t c;
    if (b < 0x80) { *len = 1; return lmw_char_class[b]; }
    if (b < 0xE0) { *len = 2; c = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    else if (b < 0xF0) {
        *len = 3; c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    } else {
        *len = 4;
        c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6)
            | (s[i + 3] & 0x3F);
    }
    return lmw_char_class[c];
}

/* End (byte offset) of the pre-token starting at byte i < n; *chars gets its length in code points. */
static inline Py_ssize_t next_pretoken(const uint8_t *s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t *chars) {
    Py_ssize_t len, j, count;
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t c1 = s[i + 1];
        if (c1 == 's' || c1 == 'd' || c1 == 'm' || c1 == 't') { *chars = 2; return i + 2; }
        if (i + 2 < n) {
            uint8_t c2 = s[i + 2];
            if ((c1 == 'l' && c2 == 'l') || (c1 == 'v' && c2 == 'e') || (c1 == 'r' && c2 == 'e')) {
                *chars = 3;
                return i + 3;
            }
        }
    }
    int cls = class_at(s, i, &len);
    j = i + len;
    count = 1;
    if (s[i] == ' ' && j < n) {
        int next = class_at(s, j, &len);
        if (next != C_SPACE) { cls = next; j += len; count = 2; }
    }
    while (j < n) {
        if (class_at(s, j, &len) != cls) break;
        j += len;
        count++;
    }
    if (cls == C_SPACE && j < n && count > 1) { /* \s+(?!\S): leave the last space to the next pre-token */
        j--;
        while ((s[j] & 0xC0) == 0x80) j--;
        count--;
    }
    *chars = count;
    return j;
}

#endif
