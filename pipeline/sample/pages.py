"""Bytes for the generated sample crawl: site boilerplate, HTML pages, charsets, HTTP and WARC records.

Pages look like the web a main-text extractor sees: a cookie banner, a header with a nav menu
and search box, breadcrumbs, the ``<article>``, share buttons, related links, a sidebar with a
newsletter box, a footer, inline CSS/JS and JSON-LD. Each site keeps its menu, sidebar and
footer across its pages, as real sites do. Records follow WARC/1.0 as Common Crawl writes them
(one gzip member per record, SHA-1 base32 block and payload digests); see the spec at
https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.0/ .
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import random
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime
from html import escape

UI_KEYS = ("home nav2 nav3 nav4 nav5 nav6 cookie accept settings rights privacy terms contact about "
           "share related more newsletter subscribe search comments notfound notfound_text reply posted "
           "popular").split()
UI = {lang: dict(zip(UI_KEYS, text.split("|"), strict=True)) for lang, text in {
    "en": "Home|News|Guides|Reviews|Community|Shop|We use cookies to improve your experience on our site "
          "and to show you personalised content. By continuing to browse, you agree to our use of "
          "cookies.|Accept all|Cookie settings|All rights reserved.|Privacy Policy|Terms of Use|Contact|"
          "About us|Share this article|Related articles|Read more|Get the best stories delivered to your "
          "inbox every week.|Subscribe|Search|Comments|Page not found|Sorry, the page you are looking for "
          "does not exist or has been moved.|Reply|Posted by|Most popular",
    "de": "Startseite|Nachrichten|Ratgeber|Tests|Forum|Shop|Wir verwenden Cookies, um Ihnen das beste "
          "Nutzererlebnis zu bieten. Wenn Sie die Website weiter nutzen, stimmen Sie der Verwendung von "
          "Cookies zu.|Alle akzeptieren|Einstellungen|Alle Rechte vorbehalten.|Datenschutz|Impressum|"
          "Kontakt|Über uns|Artikel teilen|Ähnliche Artikel|Weiterlesen|Die besten Geschichten jede Woche "
          "in Ihrem Postfach.|Abonnieren|Suche|Kommentare|Seite nicht gefunden|Die gesuchte Seite "
          "existiert leider nicht oder wurde verschoben.|Antworten|Geschrieben von|Meistgelesen",
    "fr": "Accueil|Actualités|Guides|Tests|Forum|Boutique|Nous utilisons des cookies pour améliorer votre "
          "expérience sur notre site. En poursuivant votre navigation, vous acceptez l'utilisation des "
          "cookies.|Tout accepter|Paramètres|Tous droits réservés.|Politique de confidentialité|Mentions "
          "légales|Contact|À propos|Partager cet article|Articles similaires|Lire la suite|Recevez nos "
          "meilleurs articles chaque semaine dans votre boîte mail.|S'abonner|Rechercher|Commentaires|"
          "Page introuvable|Désolé, la page que vous cherchez n'existe pas ou a été déplacée.|Répondre|"
          "Publié par|Les plus lus",
    "es": "Inicio|Noticias|Guías|Análisis|Foro|Tienda|Utilizamos cookies para mejorar su experiencia en "
          "nuestro sitio. Si continúa navegando, acepta el uso de cookies.|Aceptar todo|Configuración|"
          "Todos los derechos reservados.|Política de privacidad|Aviso legal|Contacto|Quiénes somos|"
          "Compartir este artículo|Artículos relacionados|Leer más|Reciba nuestras mejores historias cada "
          "semana en su correo.|Suscribirse|Buscar|Comentarios|Página no encontrada|Lo sentimos, la página "
          "que busca no existe o ha sido movida.|Responder|Publicado por|Lo más leído",
    "it": "Home|Notizie|Guide|Recensioni|Forum|Negozio|Utilizziamo i cookie per migliorare la tua "
          "esperienza sul nostro sito. Continuando la navigazione accetti l'uso dei cookie.|Accetta tutti|"
          "Impostazioni|Tutti i diritti riservati.|Informativa sulla privacy|Termini di utilizzo|Contatti|"
          "Chi siamo|Condividi questo articolo|Articoli correlati|Leggi di più|Ricevi le nostre storie "
          "migliori ogni settimana.|Iscriviti|Cerca|Commenti|Pagina non trovata|Siamo spiacenti, la pagina "
          "che cerchi non esiste o è stata spostata.|Rispondi|Pubblicato da|I più letti",
    "ru": "Главная|Новости|Статьи|Обзоры|Форум|Магазин|Мы используем файлы cookie, чтобы улучшить работу "
          "сайта. Продолжая просмотр, вы соглашаетесь с использованием файлов cookie.|Принять все|"
          "Настройки|Все права защищены.|Политика конфиденциальности|Условия использования|Контакты|О нас|"
          "Поделиться статьей|Похожие статьи|Читать далее|Лучшие материалы недели на вашу почту.|"
          "Подписаться|Поиск|Комментарии|Страница не найдена|К сожалению, запрашиваемая страница не "
          "существует или была перемещена.|Ответить|Автор|Самое популярное",
    "ja": "ホーム|ニュース|特集|レビュー|掲示板|ショップ|当サイトでは、利便性向上のためにクッキーを使用しています。"
          "サイトの閲覧を続けることで、クッキーの使用に同意したものとみなされます。|すべて同意する|設定|"
          "All rights reserved.|プライバシーポリシー|利用規約|お問い合わせ|会社概要|この記事をシェア|関連記事|"
          "続きを読む|毎週おすすめの記事をメールでお届けします。|登録する|検索|コメント|ページが見つかりません|"
          "お探しのページは存在しないか、移動した可能性があります。|返信|投稿者|人気記事",
    "zh": "首页|新闻|专题|评测|论坛|商城|本网站使用Cookie来改善您的浏览体验。继续浏览即表示您同意我们使用Cookie。|"
          "全部接受|设置|版权所有|隐私政策|使用条款|联系我们|关于我们|分享本文|相关文章|阅读更多|"
          "每周精选文章发送到您的邮箱。|订阅|搜索|评论|页面未找到|抱歉，您访问的页面不存在或已被移除。|回复|作者|热门文章",
}.items()}
# Natural sentences per language ({name} {city} {year} {n} {w} slots), mixed into Faker's locale word salad.
FRAMES = {lang: tuple(text.split("|")) for lang, text in {
    "de": "{name} lebt seit {year} in {city} und schreibt über {w}.|Im Jahr {year} wurden in {city} mehr als {n} "
          "Besucher gezählt.|Wir haben uns gefragt, warum {w} für so viele Menschen wichtig ist.|Das ist nicht nur "
          "eine Frage des Geldes, sondern auch der Zeit.|Nach Angaben von {name} ist die Nachfrage um {n} Prozent "
          "gestiegen.|Die meisten Leser kennen das Problem aus dem eigenen Alltag.|Am vergangenen Wochenende waren "
          "wir mit der ganzen Familie in {city}.|Man muss zugeben, dass niemand mit einem solchen Erfolg gerechnet "
          "hat.",
    "fr": "{name} habite à {city} depuis {year} et écrit sur {w}.|En {year}, la ville de {city} a accueilli plus de "
          "{n} visiteurs.|Nous nous sommes demandé pourquoi {w} est si important pour les habitants.|Ce n'est pas "
          "seulement une question d'argent, mais aussi de temps.|Selon {name}, la demande a augmenté de {n} pour "
          "cent.|La plupart des lecteurs connaissent ce problème dans leur vie quotidienne.|Le week-end dernier, "
          "nous avons visité {city} avec toute la famille.|Il faut bien avouer que personne ne s'attendait à un tel "
          "succès.",
    "es": "{name} vive en {city} desde {year} y escribe sobre {w}.|En {year}, la ciudad de {city} recibió más de {n} "
          "visitantes.|Nos preguntamos por qué {w} es tan importante para la gente.|No es solo una cuestión de "
          "dinero, sino también de tiempo.|Según {name}, la demanda ha crecido un {n} por ciento.|La mayoría de los "
          "lectores conocen este problema en su vida diaria.|El fin de semana pasado visitamos {city} con toda la "
          "familia.|Hay que reconocer que nadie esperaba un éxito así.",
    "it": "{name} vive a {city} dal {year} e scrive di {w}.|Nel {year} la città di {city} ha accolto più di {n} "
          "visitatori.|Ci siamo chiesti perché {w} sia così importante per le persone.|Non è solo una questione di "
          "soldi, ma anche di tempo.|Secondo {name}, la domanda è cresciuta del {n} per cento.|La maggior parte dei "
          "lettori conosce questo problema nella vita di tutti i giorni.|Lo scorso fine settimana siamo stati a "
          "{city} con tutta la famiglia.|Bisogna ammettere che nessuno si aspettava un successo simile.",
    "ru": "{name} живет в городе {city} с {year} года и пишет о том, что такое {w}.|В {year} году город {city} "
          "посетили более {n} туристов.|Мы задались вопросом, почему {w} так важно для многих людей.|Это не только "
          "вопрос денег, но и вопрос времени.|По словам {name}, спрос вырос на {n} процентов.|Большинство читателей "
          "знают эту проблему по собственному опыту.|В прошлые выходные мы всей семьей ездили в {city}.|Надо "
          "признать, что такого успеха никто не ожидал.",
    "ja": "{name}さんは{year}年から{city}に住んでいて、{w}について書いています。|{year}年には{city}に{n}人以上の"
          "観光客が"
          "訪れました。|なぜ{w}が多くの人にとって大切なのか、私たちは考えてみました。|これはお金だけの問題ではなく、"
          "時間の問題でもあります。|{name}さんによると、需要は{n}パーセント増えたそうです。|多くの読者は、この問題を"
          "日常生活の中で経験しています。|先週末は家族みんなで{city}に出かけました。|正直なところ、これほどの成功は"
          "誰も予想していませんでした。",
    "zh": "{name}自{year}年起住在{city}，一直在写关于{w}的文章。|{year}年，{city}接待了超过{n}名游客。|我们想知道为什么"
          "{w}对很多人来说如此重要。|这不仅是钱的问题，也是时间的问题。|据{name}介绍，需求增长了百分之{n}。|"
          "大多数读者在日常生活中都遇到过这个问题。|上周末我们全家去了{city}。|说实话，谁也没想到会这么成功。",
}.items()}
# Sentences that carry planted PII ({v}): e-mail frames || phone frames || IP frames.
PII_FRAMES = {lang: tuple(tuple(part.split("|")) for part in text.split("||")) for lang, text in {
    "en": "If you have any questions, feel free to contact me at {v}.|Send your photos to {v} and we will share the "
          "best ones.|You can reach the author at {v}.|For bookings, email {v} at least two weeks in advance.||"
          "Call us at {v} for more information.|You can reach our office at {v} from Monday to Friday.|Text me at "
          "{v} if you want the full details.|Reservations can be made by phone at {v}.||My server at {v} stopped "
          "responding after the last update.|The logs showed repeated login attempts from {v}.|Set the router "
          "address to {v} and restart the device.|I connected to {v} over SSH and everything worked.",
    "de": "Bei Fragen erreichen Sie mich unter {v}.||Rufen Sie uns unter {v} an.||Der Server mit der Adresse {v} "
          "war nicht erreichbar.",
    "fr": "Pour toute question, écrivez-moi à {v}.||Appelez-nous au {v}.||Le serveur à l'adresse {v} ne "
          "répondait plus.",
    "es": "Si tiene preguntas, escríbame a {v}.||Llámenos al {v}.||El servidor con la dirección {v} dejó de responder.",
    "it": "Per domande scrivetemi a {v}.||Chiamateci al {v}.||Il server all'indirizzo {v} non rispondeva.",
    "ru": "По всем вопросам пишите на {v}.||Звоните нам по телефону {v}.||Сервер с адресом {v} перестал отвечать.",
    "ja": "お問い合わせは{v}までご連絡ください。||お電話は{v}までお願いします。||{v}のサーバーに接続できませんでした。",
    "zh": "如有问题，请发邮件至{v}。||请拨打电话{v}联系我们。||地址为{v}的服务器无法访问。",
}.items()}
MAIL_DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "protonmail.com", "icloud.com", "gmx.de",
                "web.de", "orange.fr", "mail.ru", "yandex.ru", "qq.com", "163.com", "yahoo.co.jp", "example.org")
INTL_PHONES = {"en": ("+44 20 #### ####", "+1 ### ### ####"), "de": ("+49 30 ########", "030 #######"),
               "fr": ("+33 1 ## ## ## ##", "01 ## ## ## ##"), "es": ("+34 91 ### ## ##",), "it": ("+39 06 #### ####",),
               "ru": ("+7 495 ###-##-##", "8 (812) ###-##-##"), "ja": ("+81 3-####-####", "03-####-####"),
               "zh": ("+86 10 #### ####", "010-########")}
_LATIN1 = {"utf-8": 0.6, "iso-8859-1": 0.2, "windows-1252": 0.2}
CHARSETS = {"en": {"utf-8": 0.86, "windows-1252": 0.07, "iso-8859-1": 0.07}, "de": _LATIN1, "fr": _LATIN1,
            "es": _LATIN1, "it": _LATIN1, "ru": {"utf-8": 0.5, "windows-1251": 0.35, "koi8-r": 0.15},
            "ja": {"utf-8": 0.5, "shift_jis": 0.35, "euc-jp": 0.15}, "zh": {"utf-8": 0.5, "gbk": 0.25, "gb2312": 0.25}}


def pii_value(rng: random.Random, kind: str, lang: str, name: tuple[str, str], ip: str) -> str:
    """An e-mail address (from a first/last name), a phone number in a local or US format, or ``ip``."""
    if kind == "email":
        first, last = (s.lower() for s in name)
        user = rng.choice((f"{first}.{last}", f"{first}{last}{rng.randint(1, 99)}", f"{first[0]}{last}",
                           f"{last}_{first}"))
        return f"{user}@{rng.choice(MAIL_DOMAINS)}"
    if kind == "phone":
        if lang != "en" or rng.random() < 0.15:
            return re.sub("#", lambda _: str(rng.randint(0, 9)), rng.choice(INTL_PHONES[lang]))
        a, e, n = rng.randint(201, 989), rng.randint(200, 999), f"{rng.randint(0, 9999):04d}"
        return rng.choice((f"({a}) {e}-{n}", f"{a}-{e}-{n}", f"+1 {a} {e} {n}", f"{a}.{e}.{n}", f"(555) {e}-{n}",
                           f"555-{e}-{n}"))
    return ip


# Numbers a PII masker must leave alone ({v}), planted in English pages and listed in the manifest as
# ``pii_lookalikes``: versions and builds (one a dotted quad with an octet > 255, one five parts long), dates,
# times, prices, ISBNs, and order numbers of every length but a phone's ten digits.
LOOKALIKE_FRAMES = {
    "version": ("Version {v} finally fixed the crash on startup.", "After upgrading to {v} everything worked again.",
                "The changelog for release {v} is surprisingly short."),
    "build": ("Windows reported build {v} after the update.", "The firmware shows {v} in the settings menu."),
    "date": ("The meeting was moved to {v}.", "Tickets go on sale on {v}.", "The last entry in the log is from {v}."),
    "time": ("The shop opens at {v} on weekdays.", "The train left at {v} sharp.", "We met again at {v}."),
    "price": ("It now costs {v} at most stores.", "I paid {v} for the whole set.", "The upgrade was {v} last year."),
    "isbn": ("The book's ISBN is {v}.", "Look for ISBN {v} in the library catalogue."),
    "order": ("My order number is {v} and it still has not shipped.", "Quote reference {v} when you write to them.",
              "The parcel with tracking number {v} arrived yesterday."),
}


def _isbn13(rng: random.Random) -> tuple[str, str]:
    digits = [9, 7, rng.choice((8, 9)), *(rng.randint(0, 9) for _ in range(9))]
    digits.append(-sum(d * (3 if i % 2 else 1) for i, d in enumerate(digits)) % 10)  # ISBN-13 check digit
    s, cut = "".join(map(str, digits)), rng.randint(5, 9)  # 978-group-publisher-title-check
    return s, f"{s[:3]}-{s[3]}-{s[4:cut]}-{s[cut:12]}-{s[12]}"


def lookalike_value(rng: random.Random, kind: str) -> str:
    """A number that looks a little like an e-mail, phone or IP address but is none of them."""
    r = rng
    y, m, d, h, mi = r.randint(1995, 2025), r.randint(1, 12), r.randint(1, 28), r.randint(0, 23), r.randint(0, 59)
    if kind == "version":
        return r.choice((f"v{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 30)}",
                         f"{r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}",
                         f"{r.randint(1, 4)}.{r.randint(0, 12)}.{r.randint(0, 9)}"))
    if kind == "build":
        return f"{r.choice((6, 10))}.{r.randint(0, 3)}.{r.randint(256, 22631)}.{r.randint(1, 4000)}"
    if kind == "date":
        return r.choice((f"{y}-{m:02d}-{d:02d}", f"{m:02d}/{d:02d}/{y}", f"{d:02d}.{m:02d}.{y}"))
    if kind == "time":
        return r.choice((f"{h:02d}:{mi:02d}", f"{h:02d}:{mi:02d}:{r.randint(0, 59):02d}", f"{h % 12 + 1}:{mi:02d} pm"))
    if kind == "price":
        cents = f"{r.randint(0, 99):02d}"
        return r.choice((f"${r.randint(1, 9)},{r.randint(0, 999):03d}.{cents}", f"${r.randint(5, 999)}.{cents}",
                         f"€{r.randint(5, 999)},{cents}"))
    if kind == "isbn":
        return r.choice(_isbn13(r))  # bare or hyphenated
    n = r.choice((5, 6, 7, 8, 9, 11, 12, 13, 14))
    number = str(r.randint(1, 9)) + "".join(str(r.randint(0, 9)) for _ in range(n - 1))
    return r.choice((number, f"#{number}", f"{r.randint(100, 999)}-{r.randint(10**6, 10**7 - 1)}-"
                                           f"{r.randint(10**6, 10**7 - 1)}"))


SERVERS = ("nginx", "nginx/1.18.0 (Ubuntu)", "Apache/2.4.41 (Ubuntu)", "Apache", "cloudflare",
           "Microsoft-IIS/10.0", "LiteSpeed", "openresty")
_STATUS = {200: "OK", 301: "Moved Permanently", 404: "Not Found"}


@dataclass(frozen=True)
class Site:
    """One website: its domain, language, layout and the boilerplate it repeats on every page."""

    domain: str
    name: str
    lang: str
    layout: int  # 0 blog, 1 news, 2 WordPress-style div soup
    server: str
    ip: str
    popular: tuple[str, ...]  # sidebar links, fixed per site
    php: bool


def _e(text: str) -> str:
    return escape(text, quote=False)


def _links(titles) -> str:
    items = "".join(f'<li><a href="/p/{i + 100}/">{_e(t)}</a></li>' for i, t in enumerate(titles))
    return f"<ul>{items}</ul>"


def article_body(sections: list[tuple[str | None, list[list[str]]]], zh_ja: bool = False) -> str:
    """``<h2>`` + ``<p>`` HTML for a list of (heading or None, paragraphs of sentences)."""
    glue = "" if zh_ja else " "
    parts = []
    for heading, paragraphs in sections:
        if heading:
            parts.append(f"<h2>{_e(heading)}</h2>")
        parts.extend(f"<p>{_e(glue.join(p))}</p>" for p in paragraphs)
    return "\n".join(parts)


def forum_body(posts: list[tuple[str, str, str]], ui: dict[str, str]) -> str:
    """A thread: (author, date, text) per post."""
    return "\n".join(f'<div class="post" id="post-{1000 + i}"><div class="post-author">{_e(author)}</div>'
                     f'<div class="post-date">{date}</div><div class="post-body"><p>{_e(text)}</p></div>'
                     f'<a class="reply-link" href="#reply">{ui["reply"]}</a></div>'
                     for i, (author, date, text) in enumerate(posts))


def render_page(site: Site, url: str, title: str, main_html: str, rng: random.Random, *,
                kind: str = "article", author: str = "", date: str = "", related=(), cookie: bool = True) -> str:
    """A full HTML5 document; ``<!--CHARSET-->`` marks where a ``<meta>`` charset may go."""
    ui, lang = UI[site.lang], site.lang
    nav = "".join(f'<li><a href="/{k}/">{ui[k]}</a></li>' for k in ("nav2", "nav3", "nav4", "nav5", "nav6"))
    header = (f'<header class="site-header"><a class="logo" href="/">{_e(site.name)}</a>'
              f'<nav class="main-nav"><ul><li><a href="/">{ui["home"]}</a></li>{nav}</ul></nav>'
              f'<form class="search-form" action="/search"><input type="search" name="q" '
              f'placeholder="{ui["search"]}"><button>{ui["search"]}</button></form></header>')
    banner = (f'<div id="cookie-banner" class="cookie-consent"><p>{_e(ui["cookie"])}</p>'
              f'<button class="accept">{ui["accept"]}</button><button>{ui["settings"]}</button></div>'
              if cookie else "")
    share = (f'<div class="share-buttons"><span>{ui["share"]}</span> <a href="#">Facebook</a> '
             f'<a href="#">X</a> <a href="#">WhatsApp</a> <a href="#">E-mail</a></div>')
    rel = f'<section class="related-posts"><h3>{ui["related"]}</h3>{_links(related)}</section>' if related else ""
    aside = (f'<aside class="sidebar"><div class="widget popular"><h3>{ui["popular"]}</h3>{_links(site.popular)}</div>'
             f'<div class="widget newsletter"><p>{_e(ui["newsletter"])}</p><input type="email" placeholder="E-mail">'
             f'<button>{ui["subscribe"]}</button></div></aside>')
    footer = (f'<footer class="site-footer"><ul><li><a href="/about/">{_e(ui["about"])}</a></li>'
              f'<li><a href="/contact/">{ui["contact"]}</a></li><li><a href="/privacy/">{ui["privacy"]}</a></li>'
              f'<li><a href="/terms/">{ui["terms"]}</a></li></ul><p>&copy; 2024 {_e(site.name)}. {ui["rights"]}</p>'
              f"</footer>")
    byline = (f'<div class="byline">{ui["posted"]} <a rel="author" href="/author/">{_e(author)}</a> '
              f'<time datetime="{date}">{date}</time></div>') if author else ""
    if kind == "article":
        inner = f'<h1 class="entry-title">{_e(title)}</h1>{byline}\n{main_html}'
        body = (f'<article class="post type-post"><div class="entry-content">{inner}</div></article>'
                if site.layout == 2 else f'<article class="post">{inner}</article>')
        main = f'<main id="content">{body}\n{share}{rel}</main>'
    elif kind == "forum":
        main = f'<main id="content"><div class="thread"><h1>{_e(title)}</h1>\n{main_html}</div>{rel}</main>'
    else:  # listing / boilerplate-only / error pages
        main = f'<main id="content"><h1>{_e(title)}</h1>\n{main_html}{rel}</main>'
    crumbs = f'<nav class="breadcrumb"><a href="/">{ui["home"]}</a> &rsaquo; <a href="/nav2/">{ui["nav2"]}</a></nav>'
    columns = f"{aside}{main}" if site.layout == 1 else f"{main}{aside}"
    ld = json.dumps({"@context": "https://schema.org", "@type": "Article" if kind == "article" else "WebPage",
                     "headline": title, "url": url, "publisher": site.name}, ensure_ascii=False).replace("</", "<\\/")
    style = f"body{{font-family:{rng.choice(('Georgia,serif', 'Helvetica,Arial,sans-serif', 'system-ui'))};margin:0}}" \
            f".cookie-consent{{position:fixed;bottom:0}}.sidebar{{width:{rng.randint(240, 340)}px}}"
    script = (f'<script>window.dataLayer=window.dataLayer||[];dataLayer.push({{"page":"{rng.randint(10000, 99999)}"}});'
              f"</script>")
    top, bottom = (banner, "") if rng.random() < 0.5 else ("", banner)
    return (f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<!--CHARSET--><meta name="viewport" '
            f'content="width=device-width, initial-scale=1">\n<title>{_e(title)} | {_e(site.name)}</title>\n'
            f'<meta name="description" content="{escape(title)}">\n'
            f'<meta property="og:title" content="{escape(title)}">\n'
            f'<link rel="canonical" href="{escape(url)}">\n<link rel="stylesheet" href="/static/css/main.css">\n'
            f'<style>{style}</style>\n<script type="application/ld+json">{ld}</script>\n{script}\n</head>\n'
            f'<body class="{kind}-page">\n{top}{header}\n<div class="container">{crumbs}\n{columns}\n</div>\n'
            f'{footer}\n{bottom}<script src="/static/js/app.js" defer></script>\n</body>\n</html>\n')


def encode_page(rng: random.Random, html: str, lang: str) -> tuple[bytes, str, str, str | None, str | None]:
    """Encode in a charset usual for ``lang``, declared in the HTTP header, a ``<meta>`` tag or both.

    Returns (body, Content-Type, charset, header label or None, meta label or None)."""
    charset = rng.choices(tuple(CHARSETS[lang]), weights=tuple(CHARSETS[lang].values()))[0]
    mode = rng.choices(("both", "header", "meta"), weights=(0.55, 0.25, 0.2))[0]
    meta = None if mode == "header" else rng.choice(("charset", "charset", "http-equiv"))
    label = charset.upper() if charset == "utf-8" and rng.random() < 0.3 else charset
    ctype = "text/html" if mode == "meta" else f"text/html; charset={label}"
    tag = {None: "", "charset": f'<meta charset="{label}">\n',
           "http-equiv": f'<meta http-equiv="Content-Type" content="text/html; charset={label}">\n'}[meta]
    body = html.replace("<!--CHARSET-->", tag, 1).encode(label, errors="xmlcharrefreplace")
    return body, ctype, charset, None if mode == "meta" else label, label if meta else None


def redirect_html(target: str) -> bytes:
    """Apache's 301 stub."""
    return (f'<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n<title>301 Moved Permanently'
            f'</title>\n</head><body>\n<h1>Moved Permanently</h1>\n<p>The document has moved <a href="{target}">'
            f"here</a>.</p>\n</body></html>\n").encode("iso-8859-1")


# -- non-HTML payloads ------------------------------------------------------------------------
def pdf_bytes(rng: random.Random, text: str) -> bytes:
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1", "replace")
    blob = rng.randbytes(rng.randint(300, 1500))
    objects = (b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
               b"2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n"
               b"3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>\nendobj\n"
               b"4 0 obj\n<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream
               + b"\nendstream\nendobj\n"
               b"5 0 obj\n<< /Filter /FlateDecode /Length " + str(len(blob)).encode() + b" >>\nstream\n" + blob
               + b"\nendstream\nendobj\n")
    return b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + objects + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def jpeg_bytes(rng: random.Random) -> bytes:
    return (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x48\x00\x48\x00\x00\xff\xdb\x00\x43\x00"
            + rng.randbytes(rng.randint(2000, 6000)) + b"\xff\xd9")


def json_bytes(rng: random.Random, words: list[str]) -> bytes:
    items = [{"id": rng.randint(1, 99999), "name": w, "score": round(rng.random(), 3)} for w in words]
    return json.dumps({"status": "ok", "count": len(items), "items": items}).encode()


# -- HTTP and WARC ----------------------------------------------------------------------------
def warc_date(t: datetime) -> str:
    return f"{t:%Y-%m-%dT%H:%M:%S}Z"


def http_request(url: str, lang: str) -> bytes:
    host, _, path = url.partition("://")[2].partition("/")
    accept_lang = "en-US,en;q=0.5" if lang == "en" else f"{lang},en-US;q=0.7,en;q=0.3"
    return (f"GET /{path} HTTP/1.1\r\nUser-Agent: CCBot/2.0 (https://commoncrawl.org/faq/)\r\n"
            f"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
            f"Accept-Language: {accept_lang}\r\nAccept-Encoding: br,gzip\r\nHost: {host}\r\n"
            f"Connection: Keep-Alive\r\n\r\n").encode()


def http_response(status: int, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status} {_STATUS[status]}", *(f"{k}: {v}" for k, v in headers),
             f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def warc_record(headers: list[tuple[str, str]], block: bytes) -> bytes:
    """One WARC/1.0 record (block digest and length added) as its own gzip member."""
    head = ["WARC/1.0", *(f"{k}: {v}" for k, v in headers), f"WARC-Block-Digest: {sha1_b32(block)}",
            f"Content-Length: {len(block)}"]
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + block + b"\r\n\r\n"
    return gzip.compress(raw, compresslevel=6, mtime=0)


def record_id(rng: random.Random) -> str:
    return f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}>"


def warcinfo_record(rid: str, t: datetime, seed: int, pages: int) -> bytes:
    info = (f"software: lm-workbench pipeline.sample\r\nisPartOf: CC-MAIN-2024-sample\r\n"
            f"operator: LM Workbench\r\n"
            f"description: synthetic Common Crawl sample, seed={seed}, pages={pages}\r\npublisher: LM Workbench\r\n"
            f"format: WARC File Format 1.0\r\nconformsTo: https://iipc.github.io/warc-specifications/"
            f"specifications/warc-format/warc-1.0/\r\n").encode()
    return warc_record([("WARC-Type", "warcinfo"), ("WARC-Date", warc_date(t)),
                        ("WARC-Filename", f"CC-MAIN-{t:%Y%m%d%H%M%S}-sample-{seed:05d}.warc.gz"),
                        ("WARC-Record-ID", rid), ("Content-Type", "application/warc-fields")], info)


def page_records(rng: random.Random, *, info_id: str, resp_id: str, t: datetime, site: Site, url: str, status: int,
                 ctype: str, body: bytes, lang: str, charset: str | None, extra=()) -> tuple[bytes, int]:
    """The request, response and (30% of the time) metadata records of one fetch, and how many there are."""
    req_id = record_id(rng)
    headers = [("Date", format_datetime(t.replace(tzinfo=timezone.utc), usegmt=True)), ("Server", site.server)]
    if site.php:
        headers.append(("X-Powered-By", rng.choice(("PHP/7.4.33", "PHP/8.1.27", "PHP/8.2.15"))))
    headers += [("Content-Type", ctype), ("Vary", "Accept-Encoding"), ("Connection", "close"), *extra]
    if body and rng.random() < 0.3:  # Common Crawl stores payloads decoded and renames the header
        headers.append(("X-Crawler-Content-Encoding", "gzip"))
    date = warc_date(t)
    common = [("WARC-Warcinfo-ID", info_id), ("WARC-IP-Address", site.ip), ("WARC-Target-URI", url)]
    out = warc_record([("WARC-Type", "request"), ("WARC-Date", date), ("WARC-Record-ID", req_id),
                       ("Content-Type", "application/http; msgtype=request"), *common], http_request(url, lang))
    ident = [("WARC-Identified-Payload-Type", ctype.split(";")[0])] if body else []
    out += warc_record([("WARC-Type", "response"), ("WARC-Date", date), ("WARC-Record-ID", resp_id),
                        ("Content-Type", "application/http; msgtype=response"), *common, ("WARC-Concurrent-To", req_id),
                        ("WARC-Payload-Digest", sha1_b32(body)), *ident], http_response(status, headers, body))
    if rng.random() >= 0.3:
        return out, 2
    meta = f"fetchTimeMs: {rng.randint(40, 3000)}\r\ncharset-detected: {(charset or 'none').upper()}\r\n"
    out += warc_record([("WARC-Type", "metadata"), ("WARC-Date", date), ("WARC-Record-ID", record_id(rng)),
                        ("Content-Type", "application/warc-fields"), *common, ("WARC-Concurrent-To", resp_id)],
                       meta.encode())
    return out, 3
