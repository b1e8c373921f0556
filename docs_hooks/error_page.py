"""MkDocs hook: the 404 page's links relative to the site's root folder, where 404.html lies.

MkDocs renders error pages with root-absolute links (`/install.html`) when `site_url` is not set, for a
server that shows 404.html at any depth. This site has no fixed address and is also read from disk
(file://), where a root-absolute link points at the file system's root: here the page is rendered like
index.html, its links relative to the folder it lies in (`install.html`, `assets/...`). A server that shows
it for a missing page below the root resolves them against that page's folder instead; the navigation's
Home link still leads back. Registered in mkdocs.yml (``hooks:``).
"""
from __future__ import annotations

from mkdocs.commands.build import get_context
from mkdocs.utils import is_error_template


def on_template_context(context, template_name, config):
    if not is_error_template(template_name):
        return context
    context.update(get_context(context["nav"], context["pages"], config, base_url="."))
    return context
