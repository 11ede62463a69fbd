"""The words the rule-based extractor knows: profile keys, families, diets, technologies.

Plain data shared by the English and Chinese patterns and by the LLM extractor's
normalisation, so that every extractor files a fact under the same slot name.
"""

from __future__ import annotations

from sleepmem.pipelines.language.words import Literals, Phrases

IDENTITY_ATTRS = frozenset(
    {"name", "age", "birthday", "birthplace", "nationality", "native_language", "pronouns",
     "gender", "nickname"}
)
IDENTITY_PREFIXES = ("allergy:", "condition:", "family:")
PREFERENCE_ATTRS = frozenset(
    {"diet", "answer_length", "answer_language", "answer_format", "answer_tone"}
)
PREFERENCE_PREFIXES = ("likes:", "hobby:", "favorite:", "avoids:")

IMPORTANCE = {
    "identity": 0.9, "preference": 0.6, "fact": 0.55, "task": 0.5, "procedure": 0.6,
    "event": 0.4,
}

# Synonyms of the profile keys, in text ("my shipping address is") and in tool JSON.
ATTR_SYNONYMS: dict[str, str] = {
    "address": "address", "home address": "address", "shipping address": "address",
    "delivery address": "address", "mailing address": "address", "postal address": "address",
    "street address": "address", "shipping_address": "address", "home_address": "address",
    "delivery_address": "address", "mailing_address": "address", "postal_address": "address",
    "street_address": "address", "billing address": "billing_address",
    "billing_address": "billing_address",
    "city": "residence", "residence": "residence", "location": "residence",
    "hometown": "hometown", "home town": "hometown",
    "job": "occupation", "occupation": "occupation", "profession": "occupation",
    "job title": "occupation", "job_title": "occupation", "position": "occupation",
    "employer": "employer", "company": "employer", "workplace": "employer",
    "organization": "employer", "organisation": "employer",
    "name": "name", "first name": "name", "full name": "name", "full_name": "name",
    "display_name": "name", "customer_name": "name", "nickname": "nickname",
    "email": "email", "email address": "email", "e-mail": "email", "email_address": "email",
    "e-mail address": "email",
    "phone": "phone", "phone number": "phone", "phone_number": "phone", "mobile": "phone",
    "mobile number": "phone", "cell": "phone", "cell number": "phone", "telephone": "phone",
    "tel": "phone", "cell phone": "phone",
    "birthday": "birthday", "date of birth": "birthday", "date_of_birth": "birthday",
    "dob": "birthday", "birth date": "birthday", "birth_date": "birthday", "age": "age",
    "nationality": "nationality", "native language": "native_language",
    "mother tongue": "native_language", "first language": "native_language",
    "pronouns": "pronouns", "gender": "gender", "timezone": "timezone",
    "time zone": "timezone", "time_zone": "timezone", "diet": "diet",
}
ZH_ATTRS: dict[str, str] = {
    "邮箱": "email", "电子邮箱": "email", "邮件地址": "email", "电话": "phone", "手机": "phone",
    "手机号": "phone", "手机号码": "phone", "电话号码": "phone", "地址": "address",
    "收货地址": "address", "住址": "address", "家庭住址": "address", "生日": "birthday",
    "名字": "name", "姓名": "name", "工作": "occupation", "职业": "occupation",
    "公司": "employer", "单位": "employer", "母语": "native_language", "国籍": "nationality",
    "老家": "hometown", "家乡": "hometown", "时区": "timezone",
}

# Keys that name secrets: a slot is never built around them (redaction removed the value).
class _SecretWords:
    english = Phrases(["key", "password", "passcode", "passwd", "pin", "token", "secret", "otp",
                       "code", "card", "cvv", "ssn", "social security"])
    chinese = Literals(("密码", "验证码", "卡号", "密钥", "口令", "令牌"))

    def search(self, text: str) -> bool:
        return self.english.search(text) or self.chinese.search(text)


SECRET_WORDS = _SecretWords()
class _Redacted:
    """A "[REDACTED…]" mark the redaction stage left in a text (any case)."""

    def spans(self, text: str) -> list[tuple[int, int]]:
        low = text.lower()
        out: list[tuple[int, int]] = []
        at = low.find("[redacted")
        while at >= 0:
            end = low.find("]", at + 9)
            if end < 0:
                break
            out.append((at, end + 1))
            at = low.find("[redacted", end + 1)
        return out

    def search(self, text: str) -> bool:
        at = text.lower().find("[redacted")
        return at >= 0 and text.find("]", at + 9) >= 0

    def sub(self, repl: str, text: str) -> str:
        pos, out = 0, []
        for start, end in self.spans(text):
            out += [text[pos:start], repl]
            pos = end
        return "".join(out) + text[pos:]


REDACTED = _Redacted()

LANGS_EN: dict[str, str] = {
    "english": "english", "chinese": "chinese", "mandarin": "chinese", "cantonese": "cantonese",
    "french": "french", "german": "german", "spanish": "spanish", "japanese": "japanese",
    "korean": "korean", "italian": "italian", "portuguese": "portuguese",
    "russian": "russian", "arabic": "arabic", "hindi": "hindi", "dutch": "dutch",
    "swedish": "swedish", "polish": "polish", "turkish": "turkish", "vietnamese": "vietnamese",
    "thai": "thai", "indonesian": "indonesian", "hebrew": "hebrew", "greek": "greek",
    "ukrainian": "ukrainian",
}
LANGS_ZH: dict[str, str] = {
    "中文": "chinese", "汉语": "chinese", "普通话": "chinese", "简体中文": "chinese",
    "繁体中文": "chinese", "国语": "chinese", "粤语": "cantonese", "英文": "english",
    "英语": "english", "日语": "japanese", "日文": "japanese", "韩语": "korean",
    "韩文": "korean", "法语": "french", "法文": "french", "德语": "german", "德文": "german",
    "西班牙语": "spanish", "俄语": "russian", "意大利语": "italian", "葡萄牙语": "portuguese",
}
NATIONALITIES = frozenset(
    {"american", "british", "english", "chinese", "french", "german", "spanish", "italian",
     "japanese", "korean", "indian", "canadian", "mexican", "brazilian", "russian",
     "australian", "irish", "scottish", "dutch", "swedish", "polish", "turkish", "greek",
     "portuguese", "vietnamese", "thai", "swiss", "austrian", "belgian", "danish",
     "norwegian", "finnish", "egyptian", "nigerian", "kenyan", "argentinian", "chilean",
     "colombian", "peruvian", "filipino", "indonesian", "malaysian", "singaporean",
     "pakistani", "iranian", "israeli", "ukrainian", "new", "fine", "good", "here", "back",
     "sorry", "happy", "glad", "sure", "done", "ready", "vegan", "vegetarian", "not", "so",
     "just", "also", "still", "really", "very", "allergic", "based", "from", "afraid"}
)

FAMILY_EN: dict[str, str] = {
    "wife": "wife", "husband": "husband", "partner": "partner", "spouse": "spouse",
    "daughter": "daughter", "son": "son", "kid": "child", "child": "child",
    "mother": "mother", "mom": "mother", "mum": "mother", "mommy": "mother",
    "father": "father", "dad": "father", "daddy": "father", "brother": "brother",
    "sister": "sister", "girlfriend": "girlfriend", "boyfriend": "boyfriend",
    "fiance": "fiance", "fiancé": "fiance", "fiancee": "fiance", "fiancée": "fiance",
    "grandmother": "grandmother", "grandma": "grandmother", "grandfather": "grandfather",
    "grandpa": "grandfather", "granddaughter": "granddaughter", "grandson": "grandson",
    "aunt": "aunt", "uncle": "uncle", "cousin": "cousin", "niece": "niece",
    "nephew": "nephew", "baby": "child", "stepson": "stepson", "stepdaughter": "stepdaughter",
    "twin": "twin", "dog": "pet:dog", "cat": "pet:cat", "puppy": "pet:dog", "kitten": "pet:cat",
}
FAMILY_ZH: dict[str, str] = {
    "女儿": "daughter", "儿子": "son", "妻子": "wife", "老婆": "wife", "太太": "wife",
    "爱人": "spouse", "丈夫": "husband", "老公": "husband", "先生": "husband",
    "妈妈": "mother", "母亲": "mother", "爸爸": "father", "父亲": "father", "哥哥": "brother",
    "弟弟": "brother", "姐姐": "sister", "妹妹": "sister", "孩子": "child",
    "男朋友": "boyfriend", "女朋友": "girlfriend", "未婚夫": "fiance", "未婚妻": "fiance",
    "奶奶": "grandmother", "外婆": "grandmother", "姥姥": "grandmother",
    "爷爷": "grandfather", "外公": "grandfather", "姥爷": "grandfather",
    "孙女": "granddaughter", "孙子": "grandson", "狗": "pet:dog", "猫": "pet:cat",
}
# Roles people have to the speaker outside the family ("my friend Mel", "我同事小王"): with
# the family words, what may stand between "my" and a name as an appositive role.
SOCIAL_ROLES_EN = frozenset(
    {"friend", "colleague", "coworker", "boss", "teacher", "classmate", "neighbour",
     "neighbor", "roommate", "flatmate", "housemate", "teammate", "mentor", "manager",
     "coach", "doctor", "therapist", "landlord", "landlady", "tutor", "buddy", "pal",
     "bestie", "ex"}
)
SOCIAL_ROLES_ZH = frozenset({"朋友", "同事", "老板", "老师", "同学", "邻居"})
# Relations one person has once: a new name for them is a change, not a second member.
UNIQUE_RELATIONS = frozenset(
    {"wife", "husband", "partner", "spouse", "mother", "father", "girlfriend", "boyfriend",
     "fiance"}
)

ALLERGENS_ZH: dict[str, str] = {
    "花生": "peanut", "坚果": "nut", "海鲜": "seafood", "虾": "shrimp", "贝类": "shellfish",
    "青霉素": "penicillin", "牛奶": "milk", "鸡蛋": "egg", "小麦": "wheat", "大豆": "soy",
    "芒果": "mango", "花粉": "pollen", "猫毛": "cat hair", "狗毛": "dog hair", "麸质": "gluten",
    "乳糖": "lactose", "阿司匹林": "aspirin", "芝麻": "sesame", "鱼": "fish", "尘螨": "dust mite",
    "酒精": "alcohol", "头孢": "cephalosporin", "磺胺": "sulfa",
}
FOODS_ZH: dict[str, str] = {
    "肉": "meat", "猪肉": "pork", "牛肉": "beef", "羊肉": "lamb", "海鲜": "seafood",
    "鱼": "fish", "鸡肉": "chicken", "鸡蛋": "eggs", "蛋": "eggs", "乳制品": "dairy",
    "奶制品": "dairy", "辣": "spicy food", "香菜": "cilantro", "葱": "scallion",
    "蒜": "garlic", "荤": "meat",
}

# Technology lexicon: canonical name -> (component, display spellings handled by regex).
TECH: dict[str, tuple[str, tuple[str, ...]]] = {
    "flask": ("backend", ("flask",)), "django": ("backend", ("django",)),
    "fastapi": ("backend", ("fastapi",)), "rails": ("backend", ("ruby on rails", "rails")),
    "spring boot": ("backend", ("spring boot",)), "express": ("backend", ("express.js",)),
    "laravel": ("backend", ("laravel",)), "node.js": ("backend", ("node.js", "nodejs")),
    "nestjs": ("backend", ("nestjs", "nest.js")), "asp.net": ("backend", ("asp.net",)),
    "phoenix": ("backend", ("phoenix",)), "gin": ("backend", ("gin",)),
    "react": ("frontend", ("react", "react.js", "reactjs")),
    "vue": ("frontend", ("vue", "vue.js", "vuejs")), "angular": ("frontend", ("angular",)),
    "svelte": ("frontend", ("svelte", "sveltekit")), "next.js": ("frontend", ("next.js", "nextjs")),
    "nuxt": ("frontend", ("nuxt",)),
    "postgresql": ("database", ("postgresql", "postgres", "psql")),
    "mysql": ("database", ("mysql",)), "mariadb": ("database", ("mariadb",)),
    "mongodb": ("database", ("mongodb", "mongo")), "sqlite": ("database", ("sqlite",)),
    "sql server": ("database", ("sql server", "mssql")), "oracle": ("database", ("oracle db",)),
    "cassandra": ("database", ("cassandra",)), "dynamodb": ("database", ("dynamodb",)),
    "cockroachdb": ("database", ("cockroachdb",)), "clickhouse": ("database", ("clickhouse",)),
    "neo4j": ("database", ("neo4j",)), "snowflake": ("database", ("snowflake",)),
    "bigquery": ("database", ("bigquery",)), "supabase": ("database", ("supabase",)),
    "tidb": ("database", ("tidb",)),
    "redis": ("cache", ("redis",)), "memcached": ("cache", ("memcached",)),
    "kafka": ("queue", ("kafka",)), "rabbitmq": ("queue", ("rabbitmq",)),
    "sqs": ("queue", ("sqs",)), "nats": ("queue", ("nats",)), "pulsar": ("queue", ("pulsar",)),
    "celery": ("queue", ("celery",)), "kinesis": ("queue", ("kinesis",)),
    "aws": ("cloud", ("aws", "amazon web services")),
    "google cloud": ("cloud", ("google cloud", "gcp", "google cloud platform")),
    "azure": ("cloud", ("azure", "microsoft azure")),
    "alibaba cloud": ("cloud", ("alibaba cloud", "aliyun", "阿里云")),
    "tencent cloud": ("cloud", ("tencent cloud", "腾讯云")),
    "huawei cloud": ("cloud", ("huawei cloud", "华为云")),
    "digitalocean": ("cloud", ("digitalocean", "digital ocean")),
    "heroku": ("cloud", ("heroku",)), "vercel": ("cloud", ("vercel",)),
    "netlify": ("cloud", ("netlify",)), "hetzner": ("cloud", ("hetzner",)),
    "linode": ("cloud", ("linode",)), "fly.io": ("cloud", ("fly.io",)),
    "cloudflare": ("cdn", ("cloudflare",)),
    "kubernetes": ("orchestration", ("kubernetes", "k8s")),
    "docker swarm": ("orchestration", ("docker swarm",)), "nomad": ("orchestration", ("nomad",)),
    "openshift": ("orchestration", ("openshift",)), "ecs": ("orchestration", ("ecs",)),
    "eks": ("orchestration", ("eks",)), "gke": ("orchestration", ("gke",)),
    "docker compose": ("orchestration", ("docker compose", "docker-compose")),
    "docker": ("containers", ("docker",)),
    "kong": ("api gateway", ("kong",)), "apigee": ("api gateway", ("apigee",)),
    "tyk": ("api gateway", ("tyk",)), "envoy": ("api gateway", ("envoy",)),
    "nginx": ("web server", ("nginx",)), "traefik": ("web server", ("traefik",)),
    "caddy": ("web server", ("caddy",)), "haproxy": ("load balancer", ("haproxy",)),
    "github actions": ("ci", ("github actions",)), "gitlab ci": ("ci", ("gitlab ci",)),
    "jenkins": ("ci", ("jenkins",)), "circleci": ("ci", ("circleci",)),
    "argo cd": ("ci", ("argo cd", "argocd")),
    "prometheus": ("monitoring", ("prometheus",)), "grafana": ("monitoring", ("grafana",)),
    "datadog": ("monitoring", ("datadog",)), "sentry": ("monitoring", ("sentry",)),
    "new relic": ("monitoring", ("new relic",)),
    "elasticsearch": ("search", ("elasticsearch", "elastic search")),
    "opensearch": ("search", ("opensearch",)), "meilisearch": ("search", ("meilisearch",)),
    "terraform": ("infrastructure as code", ("terraform",)),
    "ansible": ("infrastructure as code", ("ansible",)),
    "pulumi": ("infrastructure as code", ("pulumi",)),
    "s3": ("storage", ("s3",)), "minio": ("storage", ("minio",)),
    "python": ("language", ("python",)), "golang": ("language", ("golang",)),
    "java": ("language", ("java",)), "kotlin": ("language", ("kotlin",)),
    "typescript": ("language", ("typescript",)), "javascript": ("language", ("javascript",)),
    "ruby": ("language", ("ruby",)), "php": ("language", ("php",)),
    "scala": ("language", ("scala",)), "elixir": ("language", ("elixir",)),
    "rust": ("language", ("rust",)), "c#": ("language", ("c#",)),
}
# Names that are also everyday words: only counted when written capitalised.
AMBIGUOUS_TECH = frozenset(
    {"express", "spring", "rust", "ruby", "java", "phoenix", "gin", "nomad", "envoy", "caddy",
     "oracle", "snowflake", "kong", "nats", "pulsar", "celery", "python", "scala", "react",
     "angular", "elixir", "sentry", "tyk"}
)
COMPONENT_WORDS: dict[str, str] = {
    "backend": "backend", "back end": "backend", "back-end": "backend", "api": "backend",
    "server": "backend", "frontend": "frontend", "front end": "frontend",
    "front-end": "frontend", "ui": "frontend", "web app": "frontend",
    "database": "database", "db": "database", "datastore": "database",
    "data store": "database", "cache": "cache", "caching": "cache", "queue": "queue",
    "message queue": "queue", "message broker": "queue", "broker": "queue",
    "event bus": "queue", "cloud": "cloud", "cloud provider": "cloud", "hosting": "cloud",
    "cluster": "orchestration", "orchestration": "orchestration",
    "orchestrator": "orchestration", "api gateway": "api gateway", "gateway": "api gateway",
    "ci": "ci", "ci/cd": "ci", "pipeline": "ci", "monitoring": "monitoring",
    "observability": "monitoring", "metrics": "monitoring", "search engine": "search",
    "language": "language", "web server": "web server", "reverse proxy": "web server",
    "proxy": "web server", "load balancer": "load balancer", "storage": "storage",
    # The infrastructure-as-code tools had no component word: "provisioned with Terraform".
    "infrastructure": "infrastructure as code", "infra": "infrastructure as code",
    "infrastructure as code": "infrastructure as code", "iac": "infrastructure as code",
    "provisioning": "infrastructure as code", "provisioned": "infrastructure as code",
    "provision": "infrastructure as code", "基础设施": "infrastructure as code",
    "后端": "backend", "前端": "frontend", "数据库": "database", "缓存": "cache",
    "消息队列": "queue", "队列": "queue", "云": "cloud", "云服务": "cloud", "云平台": "cloud",
    "集群": "orchestration", "容器编排": "orchestration", "网关": "api gateway",
    "api网关": "api gateway", "监控": "monitoring", "语言": "language", "存储": "storage",
}

JOBS = (
    r"nurse|doctor|physician|surgeon|dentist|pharmacist|therapist|psychologist|psychiatrist|"
    r"teacher|professor|lecturer|tutor|student|(?:phd|grad|graduate|college|high school) "
    r"student|engineer|developer|programmer|coder|designer|architect|analyst|scientist|"
    r"researcher|consultant|manager|accountant|lawyer|attorney|paralegal|chef|cook|baker|"
    r"barista|waiter|waitress|bartender|pilot|driver|mechanic|electrician|plumber|carpenter|"
    r"farmer|writer|author|journalist|editor|photographer|artist|musician|singer|actor|"
    r"actress|director|producer|salesperson|marketer|recruiter|entrepreneur|founder|"
    r"co-founder|ceo|cto|cfo|coo|intern|veterinarian|vet|paramedic|firefighter|"
    r"police officer|officer|soldier|librarian|translator|interpreter|cashier|clerk|"
    r"secretary|receptionist|administrator|sysadmin|freelancer|contractor|retiree|banker|"
    r"trader|economist|biologist|chemist|physicist|mathematician|statistician|nanny|"
    r"caregiver|social worker|counselor|counsellor|coach|trainer|dancer|tailor|hairdresser|"
    r"stylist|agent|broker|auditor|optometrist|midwife|radiologist|technician|specialist|"
    r"sre|devops|pm|data scientist|product manager|project manager|software engineer|"
    r"web developer|civil servant|homemaker|housewife|teaching assistant|postdoc|resident"
)
CONDITIONS = (
    r"diabetes|type [12] diabetes|asthma|epilepsy|hypertension|high blood pressure|"
    r"celiac(?: disease)?|coeliac(?: disease)?|crohn'?s(?: disease)?|adhd|autism|dyslexia|"
    r"migraines?|arthritis|depression|anxiety|ptsd|ocd|bipolar(?: disorder)?|cancer|copd|"
    r"heart disease|a heart condition|lupus|multiple sclerosis|ibs|gerd|insomnia|"
    r"sleep apnea|tinnitus|eczema|psoriasis|lactose intolerance|gluten intolerance|"
    r"hearing loss|colou?r ?blindness|long covid|fibromyalgia|chronic pain|back pain|"
    r"a bad back|hay fever|glaucoma|anemia|anaemia|hypothyroidism|a pacemaker"
)
DIETS = (
    r"vegan|vegetarian|veggie|pescatarian|pescetarian|keto|paleo|halal|kosher|"
    r"gluten[- ]free|dairy[- ]free|lactose[- ]free|plant[- ]based|flexitarian|carnivore|"
    r"omnivore|low[- ]carb|raw vegan|fruitarian"
)
FOODS = (
    r"red meat|meat|fish|chicken|pork|beef|lamb|mutton|seafood|shellfish|eggs?|dairy|"
    r"poultry|turkey|cheese|milk|gluten|sugar|carbs|animal products|duck|shrimp|prawns|"
    r"bacon|ham|sausages?|tofu|vegetables|veggies"
)
