import { describe, expect, it } from "vitest";
import { canonicalize } from "../../src/jcs.js";

describe("RFC 8785", () => {
  it("serialises numbers as ECMAScript does (RFC 8785 appendix B)", () => {
    const cases: [number, string][] = [
      [0, "0"], [-0, "0"], [1e21, "1e+21"], [1e-7, "1e-7"], [0.000001, "0.000001"], [5e-324, "5e-324"],
      [1.7976931348623157e308, "1.7976931348623157e+308"], [9007199254740991, "9007199254740991"],
      [333333333.3333333, "333333333.3333333"], [4.35, "4.35"], [1e20, "100000000000000000000"],
    ];
    for (const [value, text] of cases) expect(canonicalize(value)).toBe(text);
    expect(() => canonicalize(Number.NaN)).toThrow(TypeError);
  });

  it("sorts members by UTF-16 code units, not by UTF-8 bytes or code points", () => {
    // U+E000 is one UTF-16 unit 0xE000; U+1F600 is the pair D83D DE00, which sorts first
    expect(canonicalize({ "\ue000": 1, "😀": 2, a: 3 })).toBe('{"a":3,"😀":2,"\ue000":1}');
  });

  it("escapes only what JSON requires, in lowercase hex", () => {
    expect(canonicalize("\u0000\u001f\t\u007f\u2028é/")).toBe('"\\u0000\\u001f\\t\u007f\u2028é/"');
  });
});
