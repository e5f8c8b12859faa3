# Writes /etc/siwa/siwa.env from `siwa serve --help` of the binary being packaged (scripts/package):
# every setting of the table (Sources/SIWASite/Settings/SiteSettings.swift), commented out, with its
# meaning and default. The values the package sets itself (`package` below) are written uncommented.
# Input: the help's SETTINGS block, where each setting is a `  --flag` line followed by lines indented by
# 8 spaces reading `NAME: meaning (default: default)`.

BEGIN {
    package["DATA_DIR"] = "/var/lib/siwa"
    print "# /etc/siwa/siwa.env: the settings of siwa.service (EnvironmentFile=), one NAME=value a line."
    print "# Mode 0640, root:siwa: it holds TOKEN_ENCRYPTION_KEY. A conffile: upgrades keep your edits."
    print "#"
    print "# Every setting siwa reads is below, commented out, with its meaning and default (from"
    print "# `siwa serve --help`; docs: /usr/share/doc/siwa/operating.md.gz). Uncomment what you set."
    print "# Without APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH siwa runs its"
    print "# demo, on loopback only. Going live needs those four, PUBLIC_URL and TOKEN_ENCRYPTION_KEY"
    print "# (openssl rand -base64 32; keep a copy). Put the .p8 key in /etc/siwa (chgrp siwa, chmod 0640)."
    print "#"
    print "# Check, as the service would run:"
    print "#   runuser -u siwa -- sh -c 'set -a; . /etc/siwa/siwa.env; cd /var/lib/siwa; siwa doctor'"
    print "# then: systemctl enable --now siwa (or systemctl restart siwa after a change)."
}

function flush(    colon, name, rest, cut, meaning, fallback) {
    if (entry == "") return
    colon = index(entry, ": ")
    name = substr(entry, 1, colon - 1)
    rest = substr(entry, colon + 2)
    # The default is the last "(default: …)"; it may hold parentheses of its own.
    meaning = rest; fallback = ""
    for (cut = length(rest); cut > 0; cut--) {
        if (substr(rest, cut, 11) == " (default: ") {
            meaning = substr(rest, 1, cut - 1)
            fallback = substr(rest, cut + 11, length(rest) - cut - 11)
            break
        }
    }
    if (name !~ /^[A-Z][A-Z0-9_]*$/) { print "siwa-env.awk: not a setting: " entry > "/dev/stderr"; failed = 1; exit 1 }
    print ""
    wrap("# " name ": " meaning)
    if (name in package) {
        wrap("# siwa's default: " fallback "; the package's:")
        print name "=" package[name]
        written[name] = 1
    } else {
        wrap("# default: " fallback)
        print "#" name "="
    }
    count++
    entry = ""
}

# Comment lines of at most 100 characters, continued with "#   ".
function wrap(text,    line, word, words, n, i) {
    n = split(text, words, " ")
    line = words[1]
    for (i = 2; i <= n; i++) {
        if (length(line) + 1 + length(words[i]) > 100) { print line; line = "#   " words[i] }
        else line = line " " words[i]
    }
    print line
}

/^SETTINGS/ { inside = 1; next }
inside && /^  --/ { flush(); started = 1; next }
inside && started && /^        / { sub(/^ +/, ""); entry = (entry == "" ? $0 : entry " " $0); next }
inside && started && !/^        / { flush(); inside = 0 }

END {
    if (failed) exit 1
    flush()
    for (name in package) if (!(name in written)) { print "siwa-env.awk: " name " is not in the help" > "/dev/stderr"; exit 1 }
    if (count < 10) { print "siwa-env.awk: only " count " settings found in the help" > "/dev/stderr"; exit 1 }
}
